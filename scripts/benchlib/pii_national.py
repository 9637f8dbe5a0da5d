"""Valid national person ids of every catalogued country and the ordinary tokens they must
not be confused with, seeded: the recall and false-positive sides of
`scripts/bench_redaction --ids` and of tests/unit/redaction/test_id_catalogue.py.

An id is one of its country's published examples (python-stdnum's docstrings) with each
letter or digit redrawn at random, then the check characters searched until stdnum's
`is_valid` accepts it, so dates, regions and check digits are real; it keeps the
example's printed layout. The labels and JSON keys are written here from the countries'
own forms, not from the catalogue's cue expressions, so a missing cue shows as a miss.
Seeds: TUNE_SEEDS for tuning, HELDOUT_SEEDS only for the figures reported.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from shared.text.id_catalogue import CATALOGUE

if TYPE_CHECKING:
    from services.redaction.redactor import Redactor

TUNE_SEEDS = range(1, 1000)
HELDOUT_SEEDS = range(424242, 434242)
ROWS = {row.entity: row for row in CATALOGUE}

# (a published valid example in its printed layout, the label a form prints, a JSON key)
EXAMPLES: dict[str, tuple[str, str, str]] = {
    "AR_DNI": ("20.123.456", "DNI", "dni"),
    "AR_CUIT": ("20-05536168-2", "CUIT", "cuit"),
    "AT_VNR": ("1237 010180", "Sozialversicherungsnummer", "svnr"),
    "AT_TIN": ("59-119/9013", "Abgabenkontonummer", "abgabenkontonummer"),
    "AU_TFN": ("123 456 782", "Tax File Number", "tfn"),
    "BE_NN": ("85.07.30-033.28", "Rijksregisternummer", "rijksregisternummer"),
    "BE_BIS": ("98.47.28-997.65", "BIS-nummer", "bis"),
    "BG_EGN": ("8032056031", "ЕГН", "egn"),
    "BG_PNF": ("7111 042 925", "ЛНЧ", "pnf"),
    "CA_SIN": ("123 456 782", "SIN", "sin"),
    "CA_BC_PHN": ("9698 658 215", "Personal Health Number", "phn"),
    "CH_AHV": ("756.9217.0769.85", "AHV-Nummer", "ahv"),
    "CL_RUT": ("12.531.909-2", "RUT", "rut"),
    "CO_NIT": ("213.123.432-1", "NIT", "nit"),
    "CR_CPF": ("3-0455-0175", "Cédula", "cedula"),
    "CR_CR": ("155812994816", "Cédula de residencia", "cedula_residencia"),
    "CU_NI": ("91021027775", "Carné de identidad", "ci"),
    "CZ_RC": ("710319/2745", "Rodné číslo", "rodne_cislo"),
    "SK_RC": ("710319/2745", "Rodné číslo", "rodne_cislo"),
    "DK_CPR": ("211062-5629", "CPR-nummer", "cpr"),
    "DO_CEDULA": ("001-1391820-5", "Cédula", "cedula"),
    "EC_CI": ("1714307103", "Cédula", "cedula"),
    "EE_IK": ("36805280109", "Isikukood", "isikukood"),
    "ES_DNI": ("54362315K", "DNI", "dni"),
    "ES_NIE": ("X2482300W", "NIE", "nie"),
    "FI_HETU": ("131052-308T", "Henkilötunnus", "hetu"),
    "FR_NIR": ("2 95 10 99 126 111 93", "numéro de sécurité sociale", "nir"),
    "FR_NIF": ("30 23 217 600 053", "numéro fiscal", "numero_fiscal"),
    "GB_NHS": ("943 476 5870", "NHS number", "nhs"),
    "GB_UTR": ("1955839661", "UTR", "utr"),
    "GB_UPN": ("B801200005001", "UPN", "upn"),
    "GR_AMKA": ("01013099997", "ΑΜΚΑ", "amka"),
    "HR_OIB": ("33392005961", "OIB", "oib"),
    "ID_NIK": ("3171011708450001", "NIK", "nik"),
    "IE_PPS": ("6433435F", "PPS number", "pps"),
    "IL_IDNR": ("3933742-3", "תעודת זהות", "teudat_zehut"),
    "IN_PAN": ("ACUPA7085R", "PAN", "pan"),
    "IN_VID": ("2341 2341 2341 2341", "VID", "vid"),
    "IN_EPIC": ("WKH1186253", "EPIC", "epic"),
    "IS_KENNITALA": ("120174-3399", "Kennitala", "kennitala"),
    "IT_CODICEFISCALE": ("RCCMNL83S18D969H", "codice fiscale", "codice_fiscale"),
    "JP_MYNUMBER": ("6214 9832 0257", "個人番号", "my_number"),
    "KE_PIN": ("P051365947M", "KRA PIN", "kra_pin"),
    "LT_ASMENS": ("33309240064", "Asmens kodas", "asmens_kodas"),
    "MU_NID": ("J2906201304089", "NID", "nid"),
    "MX_CURP": ("BOXW310820HNERXN09", "CURP", "curp"),
    "MX_RFC": ("GODE561231GR8", "RFC", "rfc"),
    "MY_NRIC": ("770305-02-1234", "NRIC", "nric"),
    "NL_BSN": ("1112.22.333", "BSN", "bsn"),
    "NL_ONDERWIJSNUMMER": ("1012.22.331", "Onderwijsnummer", "onderwijsnummer"),
    "NO_FODSELSNUMMER": ("151086 95088", "Fødselsnummer", "fodselsnummer"),
    "NZ_IRD": ("49-091-850", "IRD number", "ird"),
    "PE_CUI": ("10117410-2", "CUI", "cui"),
    "PK_CNIC": ("34201-0891231-8", "CNIC", "cnic"),
    "PL_PESEL": ("44051401359", "PESEL", "pesel"),
    "PT_CC": ("00000000 0 ZZ4", "Cartão de Cidadão", "cc"),
    "RO_CNP": ("1630615123457", "CNP", "cnp"),
    "RU_INN": ("123456789047", "ИНН", "inn"),
    "SE_PERSONNUMMER": ("880320-0016", "Personnummer", "personnummer"),
    "SI_EMSO": ("0101006500006", "EMŠO", "emso"),
    "TH_PIN": ("3-1006-00445-63-5", "เลขประจำตัวประชาชน", "thai_id"),
    "TR_TC_KIMLIK": ("17291716060", "TC Kimlik No", "tc_kimlik"),
    "UA_RNTRC": ("1759013776", "РНОКПП", "rnokpp"),
    "US_ITIN": ("912-90-3456", "ITIN", "itin"),
    "US_ATIN": ("912-93-4567", "ATIN", "atin"),
    "US_PTIN": ("P01594846", "PTIN", "ptin"),
    "VN_MST": ("0100233488", "Mã số thuế", "mst"),
    "VN_CCCD": ("001 099 012345", "CCCD", "cccd"),
    "ZA_IDNR": ("750330 5044 08 9", "ID number", "id_number"),
    "ZA_TIN": ("0001339050", "Tax reference number", "tax_reference"),
    "GH_TIN": ("C0000803561", "TIN", "tin"),
}
# Where the check characters stand, when not last.
CHECK_AT: dict[str, tuple[int, ...]] = {
    "AT_VNR": (3,), "GB_UPN": (0,), "GB_UTR": (0,), "IS_KENNITALA": (-2,),
    "FR_NIR": (-2, -1), "TR_TC_KIMLIK": (-2, -1),
    "NO_FODSELSNUMMER": (-2, -1), "RU_INN": (-2, -1), "BE_NN": (-2, -1),
    "BE_BIS": (-2, -1), "FR_NIF": (-3, -2, -1),
}
ALPHABET = string.digits + string.ascii_uppercase
# Characters drawn from a narrower set than their class, as issued: a NIR's sex digit,
# an ATIN's 9xx-93 ranges, a Ghana Card's P (persons).
DRAW: dict[str, dict[int, str]] = {
    "FR_NIR": {0: "12"}, "US_ATIN": {0: "9", 4: "9", 5: "3"}, "GH_TIN": {0: "P"},
    "AR_CUIT": {0: "2", 1: "0347"},
}


def _redraw(rng: random.Random, c: str) -> str:
    if c.isdigit():
        return rng.choice(string.digits)
    if c.isalpha():
        return rng.choice(string.ascii_uppercase)
    return c


def valid_id(entity: str, rng: random.Random) -> str:
    """A valid id of `entity` in its example's printed layout."""
    row, example = ROWS[entity], EXAMPLES[entity][0]
    check = row.validator
    slots = [i for i, c in enumerate(example) if c.isalnum()]
    at = [slots[k] for k in CHECK_AT.get(entity, (-1,))] if row.checked else []
    for _ in range(2000):
        chars = [_redraw(rng, c) if rng.random() < 0.5 else c for c in example]
        for i, among in DRAW.get(entity, {}).items():
            chars[i] = rng.choice(among)
        for _ in range(60 if len(at) > 1 else 1):
            for i in at:
                chars[i] = rng.choice(ALPHABET if example[i].isalpha() else string.digits)
            if len(at) == 1:
                i = at[0]
                for c in ALPHABET if example[i].isalpha() else string.digits:
                    chars[i] = c
                    if check(_compact(entity, "".join(chars))):
                        return "".join(chars)
            elif check(_compact(entity, "".join(chars))):
                return "".join(chars)
        if not at and check(_compact(entity, "".join(chars))):
            return "".join(chars)
    msg = f"no valid {entity} drawn"
    raise RuntimeError(msg)


def _compact(entity: str, value: str) -> str:
    keeps = re.escape(ROWS[entity].keeps)
    return re.sub(rf"[^0-9A-Za-z{keeps}]", "", value).upper()


def reseparated(entity: str, value: str, rng: random.Random) -> str:
    """`value` with its groups parted by another mark people write (space, dot, dash,
    slash) where the id's shape takes it, else as printed."""
    if not re.search(r"[ .\-/]", value) or entity == "FI_HETU":
        return value
    mark = rng.choice([" ", ".", "-", "/"])
    other = re.sub(r"[ .\-/]", mark, value)
    return other if re.fullmatch(ROWS[entity].shape, other) else value


def compact_form(entity: str, value: str) -> str:
    return value if entity == "FI_HETU" else re.sub(r"[ .\-/]", "", value)


def rendered(entity: str, value: str, form: str) -> str:
    """A document holding `value` as form `form` puts it."""
    _, label, key = EXAMPLES[entity]
    return {
        "prose": f"Hello, the {label} of the applicant is {value} as on the form.",
        "label": f"Applicant record. {label}: {value}. Please verify.",
        "json": json.dumps({key: value, "city": "Lisbon", "status": "open"},
                           ensure_ascii=False),
        "csv": f"row,{key},since\n17,{value},2026-02-25\n",
        "table": f"| ticket | {label} | due |\n|---|---|---|\n| T-7 | {value} | Friday |",
        "metadata": json.dumps({"owner": "team-a", key: value}, ensure_ascii=False),
        "bare": f"Please find {value} attached to the request.",
    }[form]


FORMS = ("prose", "label", "json", "csv", "table", "metadata", "separators", "compact")


def planted(entity: str, seed: int, form: str) -> tuple[str, str]:
    """(document, the id's value inside it)."""
    rng = random.Random(f"{entity}/{form}/{seed}")
    value = valid_id(entity, rng)
    if form == "separators":
        value = reseparated(entity, value, rng)
        return rendered(entity, value, "label"), value
    if form == "compact":
        value = compact_form(entity, value)
        return rendered(entity, value, "json"), value
    return rendered(entity, value, form), value


# Ordinary tokens: (kind, generator). Built so that many are as long as ids are.
def _amount(r: random.Random) -> str:
    n = r.randint(1000, 999_999_999)
    body = r.choice([f"{n:,}", f"{n:,}".replace(",", "."), f"{n:,}".replace(",", " "),
                     str(n)])
    cur = r.choice(["$", "€", "£", "Rp ", "₫", "USD ", "EUR ", "R$ ", "zł", "₺", "₪", "฿",
                    "kr", "MXN ", "CHF ", "₹"])
    return f"{cur}{body}" if cur.strip() not in ("₫", "zł", "kr", "₺") else f"{body} {cur}"


def _date(r: random.Random) -> str:
    y, m, d = r.randint(1950, 2030), r.randint(1, 12), r.randint(1, 28)
    return r.choice([f"{y}-{m:02d}-{d:02d}", f"{d:02d}.{m:02d}.{y}", f"{m:02d}/{d:02d}/{y}",
                     f"{y}{m:02d}{d:02d}", f"{d:02d}{m:02d}{y % 100:02d}",
                     f"{d:02d}/{m:02d}/{y}"])


def _timestamp(r: random.Random) -> str:
    s = r.randint(1_000_000_000, 1_900_000_000)
    y, m, d = r.randint(2015, 2030), r.randint(1, 12), r.randint(1, 28)
    return r.choice([str(s), str(s * 1000 + r.randint(0, 999)),
                     f"{y}{m:02d}{d:02d}{r.randint(0, 23):02d}{r.randint(0, 59):02d}"
                     f"{r.randint(0, 59):02d}", f"{y}{m:02d}{d:02d}-{r.randint(0, 9999):04d}"])


def _order(r: random.Random) -> str:
    n = r.randint(6, 13)
    digits = str(r.randint(1, 9)) + "".join(r.choice(string.digits) for _ in range(n - 1))
    return r.choice([digits, f"ORD-{digits}", f"#{digits}", f"{digits[:4]}-{digits[4:]}",
                     f"{r.randint(2019, 2027)}-{r.randint(100000, 9999999)}"])


def _phone(r: random.Random) -> str:
    digits = "".join(r.choice(string.digits) for _ in range(r.randint(9, 11)))
    return r.choice([f"0{digits}", f"{digits[:3]} {digits[3:6]} {digits[6:]}",
                     f"({digits[:3]}) {digits[3:6]}-{digits[6:]}", f"+{digits}",
                     f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"])


def _isbn(r: random.Random) -> str:
    body = r.choice(["978", "979"]) + "".join(r.choice(string.digits) for _ in range(9))
    check = (10 - sum(int(c) * (3 if i % 2 else 1) for i, c in enumerate(body)) % 10) % 10
    full = body + str(check)
    ten = full[3:12]
    c10 = (11 - sum(int(c) * (10 - i) for i, c in enumerate(ten)) % 11) % 11
    return r.choice([f"ISBN {full[:3]}-{full[3]}-{full[4:8]}-{full[8:12]}-{full[12]}",
                     f"ISBN {full}", f"ISBN-10 {ten}{'X' if c10 == 10 else c10}",
                     f"{full[:3]}-{full[3:5]}-{full[5:9]}-{full[9:12]}-{full[12]}",
                     f"ISSN {r.randint(1000, 9999)}-{r.randint(100, 999)}X"])


def _version(r: random.Random) -> str:
    parts = ".".join(str(r.randint(0, 300)) for _ in range(r.randint(3, 4)))
    return r.choice([f"firmware {parts}", f"v{parts}", f"version {parts}",
                     f"build {r.randint(2019, 2027)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}",
                     f"build {r.randint(10_000_000, 9_999_999_999)}"])


def _ip(r: random.Random) -> str:
    return ".".join(str(r.randint(1, 254)) for _ in range(4))


ORDINARY: dict[str, Callable[[random.Random], str]] = {
    "amount": _amount, "date": _date, "timestamp": _timestamp, "order": _order,
    "phone-like": _phone, "isbn/issn": _isbn, "version": _version, "ip": _ip,
}


def ordinary_text(kind: str, seed: int) -> tuple[str, str]:
    rng = random.Random(f"ordinary/{kind}/{seed}")
    token = ORDINARY[kind](rng)
    frame = rng.choice(["Ref {t} noted in the ledger.", "Total: {t}", "{t}",
                        '{{"value": "{t}", "note": "ok"}}', "| item | {t} |",
                        "amount,ref\n12,{t}\n", "See {t} (attached)."])
    return frame.format(t=token), token


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench_redaction --ids", description=__doc__)
    p.add_argument("--seeds", type=int, default=20, help="seeds per (id, form) (default 20)")
    p.add_argument("--ordinary", type=int, default=1000, help="ordinary tokens per kind")
    p.add_argument("--tune", action="store_true", help="tuning seeds instead of held-out ones")
    p.add_argument("--json", help="write the figures here")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    from services.redaction.redactor import Redactor
    from services.redaction.settings import RedactionSettings

    args = parse(argv)
    seeds = (TUNE_SEEDS if args.tune else HELDOUT_SEEDS)[:args.seeds]
    redactor = Redactor(RedactionSettings())
    docs: list[tuple[str, str, str, str]] = []  # (entity, form, text, value)
    for row in CATALOGUE:
        for form in FORMS:
            docs += [(row.entity, form, *planted(row.entity, s, form)) for s in seeds]
    start = time.perf_counter()
    out = [r.text for i in range(0, len(docs), 32)
           for r in redactor.redact_texts([d[2] for d in docs[i:i + 32]])]
    took = time.perf_counter() - start
    hits, misses = Counter[str](), Counter[str]()
    for (entity, form, _, value), text in zip(docs, out, strict=True):
        leaked = _compact(entity, value) in _compact(entity, text)
        (misses if leaked else hits)[f"{entity}/{form}"] += 1
    figures = _report(hits, misses)
    fps = _false_positives(redactor, args.ordinary, args.tune)
    figures |= {"false_positives": fps, "docs": len(docs), "docs_per_s": len(docs) / took}
    print(f"\n{len(docs)} documents in {took:.1f} s ({len(docs) / took:.1f} docs/s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


def _report(hits: Counter[str], misses: Counter[str]) -> dict[str, object]:
    per: dict[str, list[int]] = {}
    for key in hits.keys() | misses.keys():
        entity = key.split("/")[0]
        got = per.setdefault(ROWS[entity].country + " " + entity, [0, 0])
        got[0] += hits[key]
        got[1] += hits[key] + misses[key]
    print("| country, id | masked | recall |\n|---|---|---|")
    for name, (h, n) in sorted(per.items()):
        print(f"| {name} | {h}/{n} | {100 * h / n:.1f}% |")
    forms: dict[str, list[int]] = {}
    for key in hits.keys() | misses.keys():
        got = forms.setdefault(key.split("/")[1], [0, 0])
        got[0] += hits[key]
        got[1] += hits[key] + misses[key]
    print("\n| form | masked | recall |\n|---|---|---|")
    for name, (h, n) in sorted(forms.items()):
        print(f"| {name} | {h}/{n} | {100 * h / n:.1f}% |")
    missed = sorted(k for k, v in misses.items() if v)
    print("\nmissed (entity/form: count):", ", ".join(f"{k}: {misses[k]}" for k in missed))
    return {"per_id": per, "per_form": forms}


def _false_positives(redactor: Redactor, n: int, tune: bool) -> dict[str, list[int]]:
    """Per kind of ordinary token: how many a national-id finding covers, and how many any
    finding does (phones and IP addresses are other recognizers' doing: an IP address is
    personal data here, and phone precision is not this catalogue's)."""
    national = set(ROWS)  # the catalogue's (Presidio's US_SSN and the older kinds apart)
    base = 1 if tune else 424242
    found: dict[str, list[int]] = {}
    print("\n| ordinary token | as a national id | rate | by any recognizer | examples |"
          "\n|---|---|---|---|---|")
    for kind in ORDINARY:
        texts = [ordinary_text(kind, base + i) for i in range(n)]
        ours, other, bad = 0, 0, []
        for i in range(0, n, 32):
            batch = texts[i:i + 32]
            for (text, token), results in zip(batch, redactor.analyze([t for t, _ in batch]),
                                              strict=True):
                at = text.index(token)
                hits = {r.entity_type for r in results if r.start < at + len(token)
                        and r.end > at}
                ours += bool(hits & national)
                other += bool(hits)
                if hits & national:
                    bad.append(token)
        found[kind] = [ours, other, n]
        print(f"| {kind} | {ours}/{n} | {100 * ours / n:.2f}% | {other}/{n} | {bad[:3]} |")
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
