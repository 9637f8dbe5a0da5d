"""The national person identifiers python-stdnum validates, as one table: shape, check, cues.

Each row is a number a person holds (an identity number, a social security or health
number, a personal tax number; some tax numbers are issued to companies too and say so in
`holders`). Company and VAT numbers are left out: they are no one's personal data. Brazil's
CNPJ, a company number, stays among the hand-written kinds of shared.text.national_ids,
which were served before this table and keep their own rules.

How a row is read (shared.text.national_ids applies it):

- `shape`: the candidate as people write it, separators included (spaces, dots, slashes,
  dashes); the check runs on the letters and digits alone.
- `check`: stdnum's `is_valid`. `checked` False where stdnum checks only length, format or
  an embedded date (no check digit): such a number is taken only where a cue names it.
- `printed`: the layout the number is printed in where that layout alone says what it is
  (`756.1234.5678.97`, `131052-308T`): taken on its check with no cue.
- `bare`: the number written as one run, taken on its check alone. Only where the shape
  and check are strong enough that ordinary tokens (amounts, dates, timestamps, order and
  phone numbers, ISBNs, versions, addresses) pass less than 0.1% of the time
  (tests/unit/redaction/test_id_catalogue.py measures it).
- otherwise the number needs a cue: a word naming it anywhere in the text (CSV header,
  JSON key, table column, prose) or a label right before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

S = r"[-. /]?"  # a separator people write between groups, or none
N = r"(?:n[º°o]\.?|nr\.?|no\.?|number|numer|număr|número|numéro|numero|nummer)"


@dataclass(frozen=True)
class Identifier:
    entity: str
    country: str  # ISO 3166 alpha-2
    name: str  # as its country writes it
    module: str  # the stdnum module that checks it ("" for the one row stdnum lacks)
    shape: str  # regex of the candidate, without boundaries
    cues: str  # regex of words naming it, case-insensitive
    check: str  # what the check is, for the docs
    checked: bool = True  # has a check digit (else it needs a cue whatever its shape)
    printed: str | None = None  # regex of a printed layout taken on its check alone
    bare: bool = False  # the compact run taken on its check alone
    holders: str = "persons"
    keeps: str = ""  # marks the check reads as part of the number (Finland's century sign)

    @property
    def validator(self) -> Callable[[str], bool]:
        if not self.module:
            return _OWN_CHECKS[self.entity]
        is_valid: Callable[[str], bool] = import_module(f"stdnum.{self.module}").is_valid
        return is_valid

    @property
    def needs_cue(self) -> bool:
        return not (self.checked and (self.bare or self.printed))


# Vietnam's citizen identity card (CCCD, 12 digits) is not in stdnum 2.2: its province
# codes (Circular 07/2016) and century-sex digit are the whole structure, no check digit.
_VN_PROVINCES = frozenset(str.split(
    "001 002 004 006 008 010 011 012 014 015 017 019 020 022 024 025 026 027 030 031 033 034 "
    "035 036 037 038 040 042 044 045 046 048 049 051 052 054 056 058 060 062 064 066 067 068 "
    "070 072 074 075 077 079 080 082 083 084 086 087 089 091 092 093 094 095 096"))


def _vn_cccd(number: str) -> bool:
    return len(number) == 12 and number.isdigit() and number[:3] in _VN_PROVINCES


_OWN_CHECKS: dict[str, Callable[[str], bool]] = {"VN_CCCD": _vn_cccd}


def _groups(*sizes: int, sep: str = S) -> str:
    return sep.join(rf"\d{{{n}}}" for n in sizes)


CATALOGUE: tuple[Identifier, ...] = (
    Identifier("AR_DNI", "AR", "DNI", "ar.dni", r"\d{1,2}\.?\d{3}\.?\d{3}",
               r"\bdni\b|documento nacional", "none (7-8 digits)", checked=False),
    Identifier("AR_CUIT", "AR", "CUIT/CUIL", "ar.cuit", r"\d{2}" + S + r"\d{8}" + S + r"\d",
               r"\bcui[tl]\b", "mod 11", printed=r"^\d{2}-\d{8}-\d$",
               holders="persons and companies"),
    Identifier("AT_VNR", "AT", "Sozialversicherungsnummer", "at.vnr", r"\d{4} ?\d{6}",
               r"\bsvnr\b|\bvsnr\b|\bvnr\b|versicherungsnummer|sozialversicherung|e-card|ecard",
               "mod 11 digit, birth date"),
    Identifier("AT_TIN", "AT", "Abgabenkontonummer", "at.tin",
               r"\d{2}" + S + r"\d{3}" + S + r"\d{4}", r"abgabenkonto|steuernummer|\bst\.?-?nr\b",
               "one check digit", holders="persons and companies"),
    Identifier("AU_TFN", "AU", "TFN", "au.tfn", _groups(3, 3, 3) + r"|\d{8}",
               r"\btfn\b|tax file number", "weighted mod 11"),
    Identifier("BE_NN", "BE", "Rijksregisternummer/NN", "be.nn",
               r"\d{2}" + S + r"\d{2}" + S + r"\d{2}" + S + r"\d{3}" + S + r"\d{2}",
               r"rijksregister|registre national|\bniss\b|\binsz\b|national number"
               r"|nationaal nummer|numéro national|\bnn\b", "mod 97, birth date",
               printed=r"^\d{2}\.\d{2}\.\d{2}-\d{3}\.\d{2}$"),
    Identifier("BE_BIS", "BE", "BIS", "be.bis",
               r"\d{2}" + S + r"\d{2}" + S + r"\d{2}" + S + r"\d{3}" + S + r"\d{2}",
               r"\bbis\b|bisnummer|numéro bis", "mod 97, birth date"),
    Identifier("BG_EGN", "BG", "ЕГН", "bg.egn", r"\d{10}", r"\begn\b|егн|граждански номер",
               "weighted mod 11, birth date"),
    Identifier("BG_PNF", "BG", "ЛНЧ", "bg.pnf", r"\d{4} ?\d{3} ?\d{3}", r"\bpnf\b|лнч|на чужденец",
               "weighted mod 11"),
    Identifier("CA_SIN", "CA", "SIN/NAS", "ca.sin", _groups(3, 3, 3),
               r"\bsin\b|social insurance|\bnas\b|assurance sociale", "Luhn"),
    Identifier("CA_BC_PHN", "CA", "BC PHN", "ca.bc_phn", r"\d{4} ?\d{3} ?\d{3}",
               r"\bphn\b|personal health number|carecard", "weighted mod 11"),
    Identifier("CH_AHV", "CH", "AHV/AVS", "ch.ssn", r"756" + S + _groups(4, 4, 2),
               r"\bahv\b|\bavs\b|sozialversicherung|assurance sociale|\bssn\b",
               "EAN-13 check digit, prefix 756", printed=r"^756\.\d{4}\.\d{4}\.\d{2}$", bare=True),
    Identifier("CL_RUT", "CL", "RUT/RUN", "cl.rut", r"\d{1,2}\.?\d{3}\.?\d{3}-?[\dkK]",
               r"\bru[tn]\b|rol único", "mod 11 (0-9/K)",
               printed=r"^\d{1,2}\.\d{3}\.\d{3}-[\dkK]$", holders="persons and companies"),
    Identifier("CO_NIT", "CO", "NIT/cédula", "co.nit", r"\d{3}\.?\d{3}\.?\d{3}-?\d",
               r"\bnit\b|cédula|cedula", "mod 11", holders="persons and companies"),
    Identifier("CR_CPF", "CR", "Cédula de persona física", "cr.cpf", r"0?\d-?\d{4}-?\d{4}",
               r"cédula|cedula", "none", checked=False),
    Identifier("CR_CR", "CR", "Cédula de residencia", "cr.cr", r"1\d{10,11}",
               r"cédula|cedula|\bdimex\b|residencia", "none", checked=False),
    Identifier("CU_NI", "CU", "Número de identidad", "cu.ni", r"\d{11}",
               r"carn[ée] de identidad|número de identidad|\bci\b", "birth date only",
               checked=False),
    Identifier("CZ_RC", "CZ", "Rodné číslo", "cz.rc", r"\d{6}/?\d{3,4}",
               r"rodn[ée] č[ií]slo|rodne cislo|\brč\b|birth number", "mod 11, birth date",
               printed=r"^\d{6}/\d{4}$"),
    Identifier("SK_RC", "SK", "Rodné číslo", "sk.rc", r"\d{6}/?\d{3,4}",
               r"rodn[ée] č[ií]slo|rodne cislo|\brč\b|birth number", "mod 11, birth date",
               printed=r"^\d{6}/\d{4}$"),
    Identifier("DK_CPR", "DK", "CPR", "dk.cpr", r"\d{6}-?\d{4}",
               r"\bcpr\b|personnummer|cpr-nummer", "birth date only", checked=False),
    Identifier("DO_CEDULA", "DO", "Cédula", "do.cedula", r"\d{3}-?\d{7}-?\d",
               r"cédula|cedula", "Luhn", printed=r"^\d{3}-\d{7}-\d$"),
    Identifier("EC_CI", "EC", "Cédula de identidad", "ec.ci", r"\d{9}-?\d",
               r"cédula|cedula|\bc\.i\.", "mod 10, province"),
    Identifier("EE_IK", "EE", "Isikukood", "ee.ik", r"[1-8]\d{10}",
               r"isikukood|\bik\b|personal code", "mod 11, birth date"),
    Identifier("ES_DNI", "ES", "DNI", "es.dni", r"\d{2}\.?\d{3}\.?\d{3}[- ]?[A-Za-z]",
               r"\bdni\b|\bnif\b|documento nacional", "check letter (mod 23)",
               printed=r"^\d{2}\.\d{3}\.\d{3}-?[A-Z]$"),
    Identifier("ES_NIE", "ES", "NIE", "es.nie", r"[XYZxyz][- ]?\d{7}[- ]?[A-Za-z]",
               r"\bnie\b|\bnif\b|extranjero", "check letter (mod 23)", bare=True),
    Identifier("FI_HETU", "FI", "Henkilötunnus", "fi.hetu", r"\d{6}[-+ABCDEFYXWVU]\d{3}[\dA-Za-z]",
               r"henkilötunnus|\bhetu\b|personbeteckning|sotu", "mod 31 check character",
               bare=True, keeps="+-"),
    Identifier("FR_NIR", "FR", "NIR (numéro de sécurité sociale)", "fr.nir",
               r"[12378] ?\d{2} ?\d{2} ?(?:\d{2}|2[AaBb]) ?\d{3} ?\d{3} ?\d{2}",
               r"\bnir\b|sécurité sociale|securite sociale|\binsee\b|carte vitale",
               "mod 97 key", printed=r"^\d \d{2} \d{2} [\dAB]{2} \d{3} \d{3} \d{2}$", bare=True),
    Identifier("FR_NIF", "FR", "Numéro fiscal", "fr.nif", r"[0-3]\d" + S + _groups(2, 3, 3, 3),
               r"numéro fiscal|numero fiscal|\bspi\b|identification fiscale",
               "mod 511 key"),
    Identifier("GB_NHS", "GB", "NHS number", "gb.nhs", _groups(3, 3, 4),
               r"\bnhs\b|\bchi\b|health service", "mod 11"),
    Identifier("GB_UTR", "GB", "UTR", "gb.utr", r"\d{5} ?\d{5}",
               r"\butr\b|unique tax(?:payer)? reference", "weighted mod 11",
               holders="persons and companies"),
    Identifier("GB_UPN", "GB", "Unique Pupil Number", "gb.upn", r"[A-Za-z]\d{11}[A-Za-z\d]",
               r"\bupn\b|pupil number", "mod 23 check letter"),
    Identifier("GR_AMKA", "GR", "ΑΜΚΑ", "gr.amka", r"\d{11}",
               r"\bamka\b|αμκα|α\.μ\.κ\.α|κοινωνικής ασφάλισης", "Luhn, birth date"),
    Identifier("HR_OIB", "HR", "OIB", "hr.oib", r"\d{11}",
               r"\boib\b|osobni identifikacijski", "ISO 7064 mod 11,10",
               holders="persons and companies"),
    Identifier("ID_NIK", "ID", "NIK", "id.nik", r"\d{2}\.?\d{2}\.?\d{2}\.?\d{6}\.?\d{4}",
               r"\bnik\b|\bktp\b|induk kependudukan", "province, birth date (no check digit)",
               checked=False),
    Identifier("IE_PPS", "IE", "PPS number", "ie.pps", r"\d{7}[A-Wa-w][A-IWa-iw]?",
               r"\bpps\b|\bppsn\b|personal public service", "mod 23 check letter"),
    Identifier("IL_IDNR", "IL", "תעודת זהות", "il.idnr", r"\d{7,8}-?\d",
               r"תעודת זהות|מספר זהות|ת\.ז|\bt\.?z\b|teudat zehut|mispar zehut|israeli id",
               "Luhn"),
    Identifier("IN_PAN", "IN", "PAN", "in_.pan", r"[A-Za-z]{5}\d{4}[A-Za-z]",
               r"\bpan\b|permanent account|पैन", "format only", checked=False),
    Identifier("IN_VID", "IN", "Aadhaar VID", "in_.vid", _groups(4, 4, 4, 4),
               r"\bvid\b|virtual id|aadhaa?r|आधार", "Verhoeff"),
    Identifier("IN_EPIC", "IN", "EPIC (voter id)", "in_.epic", r"[A-Za-z]{3}\d{7}",
               r"\bepic\b|voter id|मतदाता", "Luhn on the digits"),
    Identifier("IS_KENNITALA", "IS", "Kennitala", "is_.kennitala", r"\d{6}-?\d{4}",
               r"kennitala|\bkt\.?\b", "mod 11, birth date", holders="persons and companies"),
    Identifier("IT_CODICEFISCALE", "IT", "Codice fiscale", "it.codicefiscale",
               r"[A-Za-z]{6}[\dLMNPQRSTUVlmnpqrstuv]{2}[A-Za-z][\dLMNPQRSTUVlmnpqrstuv]{2}"
               r"[A-Za-z][\dLMNPQRSTUVlmnpqrstuv]{3}[A-Za-z]",
               r"codice fiscale|\bc\.?f\.?\b|tax code", "check character", bare=True),
    Identifier("JP_MYNUMBER", "JP", "個人番号 (My Number)", "jp.in_", _groups(4, 4, 4),
               r"個人番号|マイナンバー|my ?number|kojin", "weighted mod 11"),
    Identifier("KE_PIN", "KE", "KRA PIN", "ke.pin", r"[APap]\d{9}[A-Za-z]",
               r"\bkra\b|\bpin\b", "format only", checked=False),
    Identifier("LT_ASMENS", "LT", "Asmens kodas", "lt.asmens", r"\d{11}",
               r"asmens kodas|personal code", "mod 11, birth date"),
    Identifier("MU_NID", "MU", "National identity number", "mu.nid", r"[A-Za-z]\d{12}[A-Za-z\d]",
               r"\bnid\b|national identity|identity card", "mod 17 check character", bare=True),
    Identifier("MX_CURP", "MX", "CURP", "mx.curp",
               r"[A-Za-z]{4}\d{6}[HMXhmx][A-Za-z]{5}[\dA-Za-z]\d",
               r"\bcurp\b|clave única", "check digit, birth date, state", bare=True),
    Identifier("MX_RFC", "MX", "RFC", "mx.rfc", r"[A-Za-z&Ññ]{4}[- ]?\d{6}[- ]?[A-Za-z\d]{3}",
               r"\brfc\b|registro federal",
               "birth date (its check character is not verified: some were issued without)",
               checked=False, holders="persons and companies"),
    Identifier("MY_NRIC", "MY", "NRIC/MyKad", "my.nric", r"\d{6}-?\d{2}-?\d{4}",
               r"\bnric\b|mykad|\bic\b|kad pengenalan", "birth date, place (no check digit)",
               checked=False),
    Identifier("NL_BSN", "NL", "BSN", "nl.bsn", r"\d{4}\.?\d{2}\.?\d{3}|\d{3}\.\d{3}\.\d{3}",
               r"\bbsn\b|burgerservicenummer|sofinummer|sofi-nummer", "11-proof",
               printed=r"^\d{4}\.\d{2}\.\d{3}$"),
    Identifier("NL_ONDERWIJSNUMMER", "NL", "Onderwijsnummer", "nl.onderwijsnummer",
               r"10\d{2}\.?\d{2}\.?\d{3}", r"onderwijsnummer", "11-proof"),
    Identifier("NO_FODSELSNUMMER", "NO", "Fødselsnummer", "no.fodselsnummer", r"\d{6} ?\d{5}",
               r"fødselsnummer|fodselsnummer|personnummer|d-nummer",
               "two mod-11 digits, birth date",
               printed=r"^\d{6} \d{5}$"),
    Identifier("NZ_IRD", "NZ", "IRD number", "nz.ird", r"\d{2,3}-?\d{3}-?\d{3}",
               r"\bird\b|inland revenue", "weighted mod 11", holders="persons and companies"),
    Identifier("PE_CUI", "PE", "CUI/DNI", "pe.cui", r"\d{8}-?[\dA-Ka-k]",
               r"\bcui\b|\bdni\b|documento nacional", "check character"),
    Identifier("PK_CNIC", "PK", "CNIC", "pk.cnic", r"\d{5}-?\d{7}-?\d",
               r"\bcnic\b|\bnic\b|شناختی|identity card", "province, gender (no check digit)",
               checked=False),
    Identifier("PL_PESEL", "PL", "PESEL", "pl.pesel", r"\d{11}", r"\bpesel\b",
               "weighted mod 10, birth date"),
    Identifier("PT_CC", "PT", "Cartão de Cidadão", "pt.cc",
               r"\d{8} ?\d ?[A-Za-z]{2}\d", r"cart[ãa]o de cidad[ãa]o|\bcc\b|citizen card",
               "Luhn over letters", bare=True),
    Identifier("RO_CNP", "RO", "CNP", "ro.cnp", r"[1-9]\d{12}", r"\bcnp\b|cod numeric personal",
               "weighted mod 11, birth date, county"),
    Identifier("RU_INN", "RU", "ИНН (personal)", "ru.inn", r"\d{12}",
               r"\binn\b|инн|налогоплательщик", "two weighted mod-11 digits"),
    Identifier("SE_PERSONNUMMER", "SE", "Personnummer", "se.personnummer",
               r"(?:19|20)?\d{6}[-+ ]?\d{4}", r"personnummer|samordningsnummer|\bpnr\b",
               "Luhn, birth date"),
    Identifier("SI_EMSO", "SI", "EMŠO", "si.emso", r"\d{13}", r"\bem[šs]o\b|matična številka",
               "weighted mod 11, birth date"),
    Identifier("TH_PIN", "TH", "เลขประจำตัวประชาชน", "th.pin",
               r"\d" + S + r"\d{4}" + S + r"\d{5}" + S + r"\d{2}" + S + r"\d",
               r"เลขประจำตัวประชาชน|บัตรประชาชน|เลขบัตร|thai id|national id", "weighted mod 11",
               printed=r"^\d-\d{4}-\d{5}-\d{2}-\d$"),
    Identifier("TR_TC_KIMLIK", "TR", "T.C. Kimlik No", "tr.tckimlik", r"[1-9]\d{10}",
               r"kimlik|\bt\.?c\.?\b|\btckn\b", "two check digits"),
    Identifier("UA_RNTRC", "UA", "РНОКПП (ІПН)", "ua.rntrc", r"\d{10}",
               r"рнокпп|\brnokpp\b|іпн|ідентифікаційний код|\brntrc\b|\bipn\b", "weighted mod 11"),
    Identifier("US_ITIN", "US", "ITIN", "us.itin", r"9\d{2}-?\d{2}-?\d{4}",
               r"\bitin\b|individual taxpayer", "issued ranges (no check digit)", checked=False),
    Identifier("US_ATIN", "US", "ATIN", "us.atin", r"9\d{2}-?93-?\d{4}",
               r"\batin\b|adoption taxpayer", "format only", checked=False),
    Identifier("US_PTIN", "US", "PTIN", "us.ptin", r"[Pp]-?\d{8}", r"\bptin\b|preparer tax",
               "format only", checked=False),
    Identifier("VN_MST", "VN", "Mã số thuế", "vn.mst", r"\d{10}(?:-\d{3})?",
               r"mã số thuế|ma so thue|\bmst\b", "weighted mod 11",
               holders="persons and companies"),
    Identifier("VN_CCCD", "VN", "Căn cước công dân (CCCD/CMND)", "", r"\d{3}[ .]?\d{3}[ .]?\d{6}",
               r"\bcccd\b|\bcmnd\b|căn cước|can cuoc|chứng minh nhân dân|citizen identity",
               "province code (no check digit)", checked=False),
    Identifier("ZA_IDNR", "ZA", "ID number", "za.idnr", r"\d{6} ?\d{4} ?\d{2} ?\d",
               r"identity number|\bid number|\brsa id\b|id no", "Luhn, birth date"),
    Identifier("ZA_TIN", "ZA", "Tax reference number", "za.tin", r"[01239]\d{3}/?\d{3}/?\d{2}/?\d",
               r"tax reference|income tax number|\bsars\b", "Luhn"),
    Identifier("GH_TIN", "GH", "TIN / Ghana Card", "gh.tin", r"[PCGQVpcgqv]\d{10}",
               r"\btin\b|ghana card|taxpayer", "mod 11", holders="persons and companies"),
)
CATALOGUE_ENTITIES = tuple(row.entity for row in CATALOGUE)
