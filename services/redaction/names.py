"""Person names the small NER model misses, and technology words it takes for people.

Measured on Faker-generated tickets (scripts/bench_redaction), en_core_web_sm alone found
about 80% of person names and a fifth of its PERSON findings were words like Kafka,
Grafana or "Cheers". Three rules close most of that gap without a bigger model:
- a given-names gazetteer (gender-guesser's list of about 60,000 first names from many
  countries, and 7,000 more from Faker's South Asian, East Asian, Latin American, Turkish
  and other locales in given_names.txt): a known first name and the capitalised words
  after it are a person;
- where names stand alone: after a greeting ("Hi Anna,"), on the line after a closing
  ("Best regards,\nAnna Weber", "--\nAnna Weber") or after it ("Thanks, Anna"), after an
  honorific ("Dr. Weber"), as a chat's speaker labels ("[09:15] Anna Weber: ...",
  "<anna> ...", "Anna: ..." when several lines start so) and @-mentions, as an e-mail's
  display names ("Anna Weber <anna@example.com>", From/To/Cc lines). A label is a name
  when no word of it is a technology, function or common field word ("Note:", "Root
  Cause:", "Agent:") and it starts with a known given name or holds a word no dictionary
  (WordNet's lemmas, shipped with the spaCy model) holds. Any name so found is then
  found again wherever it stands alone, in any case when no dictionary holds it;
- a PERSON finding made only of technology or product words (tech_terms.txt plus
  the allow list in settings), or holding a digit, is dropped.

On technical prose with no people in it (scientific abstracts, runbooks) the NER model
still takes gene, drug and method names for people ("Activin", "Chordin", "Monte
Carlo"), about one finding in every two abstracts. So NER's PERSON findings need support
(`NameRecognizer.resolve`): a lone word is a person when it is a known given name, when the
text names the same person in full elsewhere ("Anna Weber ... Weber said"), or when a cue
around it says so ("ask Okafor", "Okafor wrote"); a longer span when every word is written
as a name, none is a common word the text also uses in lower case, and it does not end in
a word that names a thing ("... Foundation", "... Scale", "... Syndrome").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

from presidio_analyzer import LocalRecognizer, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts

from services.redaction.native_names import NATIVE, native_name_spans
from services.redaction.recognizers import finding
from shared.text.ordinary import version

_UP = r"[^\W\d_a-zß-ÿ]"  # an upper-case letter (any script with case)
WORD = rf"{_UP}[\w'’]*(?:-{_UP}[\w'’]*)*"
PARTICLES = (r"(?:van|von|de|del|della|der|den|di|da|du|le|la|ter|ten|bin|al|dos|das|y|en|"
             r"op|het|'t|zu|af|av|Ó|Ní|Nic|Uí|Ua|ibn|bint|binti|el)")
# A capitalised word then up to three more (particles allowed between them).
# Closings of the served languages other than English.
_CLOSINGS_ELSEWHERE = ("mit freundlichen grüßen|viele grüße|beste grüße|grüße|lg|danke|"
                       "atenciosamente|abraços|abraço|obrigad[oa]|saludos|atentamente|gracias|"
                       "cordialement|merci|с уважением|спасибо|всего доброго|с наилучшими "
                       "пожеланиями|감사합니다|고맙습니다|よろしくお願い(?:いた)?します|以上|"
                       "谢谢|謝謝|此致|धन्यवाद|सादर|شكرا|شكراً|مع التحية|تحياتي")
_SEQUENCE = re.compile(
    rf"(?<![\w@.])({WORD})((?:[ \t]+(?:{PARTICLES}[ \t]+){{0,3}}{WORD}){{0,3}})")
_GREETING = re.compile(
    rf"(?m)^[ \t]*(?i:hi|hello|hey|dear|good (?:morning|afternoon|evening)|greetings|hallo|"
    rf"liebe|lieber|sehr geehrte|sehr geehrter|guten (?:tag|morgen)|olá|ola|oi|prezad[oa]|"
    rf"car[oa]|bom dia|boa tarde|hola|estimad[oa]|buenos días|bonjour|salut|cher|chère|"
    rf"здравствуйте|привет|уважаем(?:ый|ая)|добрый день|доброе утро)"
    rf"[ \t,]+({WORD}(?:[ \t]+{WORD}){{0,2}})[ \t]*[,!:]")
_CLOSING = re.compile(
    rf"(?m)^[ \t]*(?:(?i:thanks|thank you|many thanks|cheers|best|best regards|kind regards|"
    rf"warm regards|regards|sincerely|yours|br|greetings|{_CLOSINGS_ELSEWHERE})"
    rf"[ \t]*[,!.。，،]?|--|—|–)[ \t]*\n[ \t]*"
    rf"({WORD}(?:[ \t]+(?:{PARTICLES}[ \t]+)?{WORD}){{0,2}})[ \t]*$")
# The signature's next line when it is a name as well, two or three words ("Hayun Nam\n
# Yeongsug Go": two people sign); a title there ("Support Engineer") is not a name.
# Words of a title or a team's name on a signature's line ("Platform Team", "Head of Sales").
_SIGNATURE_TITLE = frozenset(str.split(
    "team group department dept platform support engineering engineer operations ops sales "
    "office desk lead director manager head officer president founder owner staff service "
    "services inc ltd gmbh llc corp co company ag sa plc center centre unit division"))
# Its words may be initials ("Hans D.", "Hans-J. Trubin") and have a particle or a short
# lower-case connector between them ("Michaele auch Schlauchin"), up to four words.
_SIGNED_TOO = re.compile(
    rf"\n[ \t]*({WORD}\.?(?:[ \t]+(?:{PARTICLES}[ \t]+|[^\W\d_A-Z]{{2,5}}[ \t]+)?{WORD}\.?)"
    rf"{{1,3}})[ \t]*$", re.M)
_INITIAL = re.compile(rf"^{_UP}\.?$")
# A closing, then a name in a script without case on its own line ("감사합니다.\n최미숙"):
# the lines after it may sign in Latin letters ("Go Hyeonjeong").
_CLOSING_NATIVE = re.compile(
    rf"(?m)^[ \t]*(?i:thanks|thank you|best regards|kind regards|regards|best|"
    rf"{_CLOSINGS_ELSEWHERE})[ \t]*[,!.。，،]?[ \t]*\n[ \t]*"
    r"[\u0900-\u097f\u0600-\u06ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3]"
    r"[^\n\x00-\x7f]{0,20}[ \t]*$")
# A closing and the name on one line, the line's last words: "Thanks, Priya".
_CLOSING_INLINE = re.compile(
    r"(?m)^[ \t]*(?i:thanks|thank you|many thanks|cheers|best|best regards|kind regards|"
    rf"warm regards|regards|br|{_CLOSINGS_ELSEWHERE})[ \t]*,[ \t]*"
    rf"({WORD}(?:[ \t]+(?:{PARTICLES}[ \t]+)?{WORD}){{0,2}})"
    r"[ \t]*[.!]?[ \t]*$")
_NAME_RUN = rf"{WORD}(?:[ \t]+(?:{PARTICLES}[ \t]+){{0,2}}{WORD}){{0,2}}"
# A chat line's time stamp: [09:15], 09:15, [2026-01-02 09:15:03], 02/01/2026, 9:15 AM -
_STAMP = (r"(?:\[[^\]\n]{0,24}?\d{1,2}:\d{2}[^\]\n]{0,12}\]|"
          r"(?:\d{4}-\d{2}-\d{2}[ T]|\d{1,2}[/.]\d{1,2}[/.]\d{2,4},?[ \t])?"
          r"\d{1,2}:\d{2}(?::\d{2})?(?:[ \t]?[AaPp]\.?[Mm]\.?)?)")
_STAMPED_LINE = re.compile(rf"(?m)^[ \t]*{_STAMP}[ \t]*(?:[-–|][ \t]*)?\S[^\n:]{{0,40}}:")
# A time stamp after the speaker: "Simone (19:17): ..."
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?(?:[ \t]?[AaPp]\.?[Mm]\.?)?"
# A line that starts with a speaker: an optional stamp, then <nick> or "Given Surname:".
_LABEL_LINE = re.compile(
    rf"(?m)^[ \t]*(?:(?P<stamp>{_STAMP})[ \t]*(?:[-–|][ \t]*)?)?"
    rf"(?:<(?P<nick>[^\W\d_][\w\u0900-\u097f\u0600-\u06ff.'’-]{{0,30}}"
    rf"(?: {_UP}[\w'’-]{{1,30}})?)>|(?P<label>{_NAME_RUN})"
    rf"(?:[ \t]*\((?P<after>{_CLOCK})\))?[ \t]*:)(?=[ \t]|$)")
# E-mail: a display name before an address, anywhere ("Priya Raman <p@example.in>",
# '"Raman, Priya" <p@example.in>'), and the names on From/To/Cc lines of a header block.
_ADDRESSED = re.compile(
    rf"(?:\"([^\"\n<>@]{{1,80}})\"|(?<![\w@.])({_NAME_RUN}))[ \t]*<[^<>\s@]+@[^<>\s]+>")
_HEADER = re.compile(
    r"(?im)^(?:from|to|cc|bcc|reply-to|sender|von|an|de|para|à)[ \t]*:[ \t]*(\S.*)$")
_HEADER_BLOCK = re.compile(r"(?im)^(?:from|to|cc|subject|date|sent|betreff|objet|asunto)"
                           r"[ \t]*:")
_HEADER_NAME = re.compile(rf"(?:^|[,;])[ \t]*({_NAME_RUN})[ \t]*(?=[,;]|$)")
# A chat mention: "@Priya", "@priya.raman".
_MENTION = re.compile(r"(?<![\w@.])@([^\W\d_][\w'’-]*(?:\.[^\W\d_][\w'’-]*)?)")
# What tags look like in a line-initial <...> that is no chat nick.
_HTML_TAGS = frozenset({"a", "b", "i", "p", "u", "br", "hr", "li", "ul", "ol", "tr", "td", "th",
                        "div", "span", "img", "em", "html", "pre", "code"})
_HONORIFIC = re.compile(  # not after a number: "1.0 M. Transformation" is molar
    r"(?<![\d.,] )(?<![\d.,])\b(?:Mr|Mrs|Ms|Mx|Miss|Dr|Prof|Sir|Madam|Herr|Frau|Mme|Mlle|M)"
    rf"\.?[ \t]+"
    rf"({WORD}(?:[ \t]+{WORD}){{0,2}})")
# A record's or form's name field: '"name": "Anna Weber"', 'name=Anna Weber' (a query
# string, read decoded), 'Nome: Anna Weber'. Not a thing's name field ("product name:").
_NAME_FIELD = re.compile(
    r"(?<![\w-])[\"']?(?i:name|full[_ -]?name|display[_ -]?name|customer[_ -]?name|"
    r"contact[_ -]?name|client[_ -]?name|first[_ -]?name|last[_ -]?name|given[_ -]?name|"
    r"family[_ -]?name|surname|nome|nome[_ ]completo|nombre|nom|vorname|nachname|"
    r"contact|contact[_ -]?person|persona de contacto|pessoa de contato|contato|contacto|"
    r"ansprechpartner(?:in)?|контактное лицо|контакт|"
    r"kundenname|имя|фио|фамилия|氏名|姓名|이름|नाम|الاسم)(?:[_-]?\d{1,2})?[\"']?"
    rf"[ \t]*[:=：][ \t]*[\"']?({_NAME_RUN})")
_THING_FIELD = re.compile(r"(?i)(?:product|service|project|app|host|file|pod|team|cluster|"
                          r"model|topic|queue|table|bucket|database|repo|branch|company|org|"
                          r"brand|code|image|package|job|node|device|field|column|key|tag)"
                          r"[ \t_-]?[\"']?$")
# A Latin-script name before a Japanese, Korean or Chinese honorific: "Tsubasa様",
# "Junseo 님께", "Wang先生".
_HONORIFIC_AFTER = re.compile(
    r"(?<![\w@.])([A-ZÀ-ÖØ-ÞĀ-Ž](?:[a-zß-öø-ÿā-ž'’]+|(?=[ \t][A-ZÀ-ÖØ-ÞĀ-Ž][a-z]))"
    r"(?:[ \t][A-ZÀ-ÖØ-ÞĀ-Ž][a-zß-öø-ÿā-ž'’]+)?)"
    r"[ \t]?(?:様|さま|さん|くん|ちゃん|殿|先生|女士|小姐|님께|님|씨|께|जी|ji\b|"
    r"[,，]?[ \t]*(?:您好|你好))")
# A Latin-script name introduced by a Chinese word and followed by one: "该工单由He Jie于周一
# 创建", "已升级给Li Na，等待回复" (the English words of "He Jie" hide it from NER).
_CJK_INTRO = re.compile(
    r"(?:由|给|交给|转给|升级给|联系|感谢|抄送|負責人|负责人|經由|轉給)[ \t]*"
    r"([A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ'’]+(?:[ \t][A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ'’]+){1,2})"
    r"(?=[ \t]*(?:[于於在，,。、的已将]|$))")
SCORE = 0.6
# Where a lone word is a name surely enough to find it again elsewhere in the text.
STRONG = frozenset({"speaker label", "mention", "e-mail address name", "e-mail header",
                    "greeting", "signature"})
# Who someone is, written before the name ("Customer Anna Weber").
ROLES = ("customer", "client", "user", "engineer", "colleague", "manager", "analyst",
         "developer", "admin", "operator", "technician", "contractor", "employee", "caller",
         "requester")
# Words that introduce a person: "Thanks to Summer", "Escalated to Saanvi Parmer".
_INTRO = re.compile(
    r"(?i:\b(?:thanks to|thank you|thanks|ask|asked|ping|pinged|contact|contacted|cc|bcc|"
    r"escalated to|assigned to|reassigned to|handed over to|handed to|owner|assignee|"
    r"reporter|on-call|approved by|reported by|signed off by|requested by|raised by|"
    r"opened by|led by|noticed by|fixed by|owned by|"
    rf"{'|'.join(ROLES)}|"
    r"(?:call|meeting|spoke|speaking|chat|sync|talked|met) with|"
    r"(?:escalation|e-?mail|mail|message|call|note|reply|update|request|complaint|"
    r"feedback) from|"
    # The same in the served languages: German, Portuguese, Spanish, French, Russian,
    # Arabic, Hindi, Chinese, Japanese, Korean.
    r"eskaliert an|weitergeleitet an|übergeben an|danke an|geöffnet von|erstellt von|"
    r"escalado para|encaminhado para|aberto por|obrigad[oa]|escalado a|abierto por|"
    r"gracias a|asignado a|escaladé à|transmis à|ouvert par|merci à|assigné à|"
    r"передано|эскалировано|открыл(?:\(а\)|а)?|спасибо|"
    r"تم التصعيد إلى|التصعيد إلى|بواسطة|من قبل|عزيزي|عزيزتي|مرحبا|السيد|السيدة|"
    r"नमस्ते|धन्यवाद|प्रिय|श्री|श्रीमती|由|给|升级给|感谢|尊敬的|亲爱的))"
    r"[ \t]*:?[ \t]+"
    rf"({WORD}(?:[ \t]+(?:{PARTICLES}[ \t]+){{0,2}}{WORD}){{0,2}})")
_MORE_WORDS = re.compile(rf"(?:[ \t]+{WORD})*")
_POSSESSIVE = re.compile(rf"(?<![\w@.])({WORD})['’]s\b")
# Two or three words written as a name, then something people do.
_ACTS = (r"said|says|wrote|writes|asked|replied|confirmed|reported|mentioned|noted|"
         r"suggested|approved|agreed|joined|left|called|emailed|owns|owned|rolled back|"
         r"fixed|restarted|deployed|merged|opened|closed|noticed|escalated|acknowledged|"
         r"is on call|is out|will own|signed off")
_FULL_NAME_ACTS = re.compile(
    rf"(?<![\w@.])({WORD}(?:[ \t]+(?:{PARTICLES}[ \t]+){{0,2}}{WORD}){{1,2}})"
    rf"[ \t]+(?:{_ACTS})\b")
# Cues that a lone capitalised word is someone ("ask Okafor", "cc: Okafor", "Okafor wrote").
_CUE_BEFORE = re.compile(
    r"(?i)(?:@|\b(?:ask|asked|ping|pinged|contact|contacted|call|called|tell|told|email|"
    r"emailed|thank|thanks|cc|bcc|owner|assignee|assigned to|reporter|reported by|"
    r"escalated to|handed over to|handed to|approved by|signed off by|on-call|on call|"
    r"requested by|raised by|opened by|closed by|attn|(?:e-?mail|mail|message|call|note|"
    r"reply|update|request|ticket|word) from)\b)[ \t]*:?[ \t]*$")
_CUE_AFTER = re.compile(
    r"^(?:[ \t]+(?:said|says|wrote|writes|asked|asks|replied|replies|confirmed|reported|"
    r"mentioned|noted|suggested|approved|agreed|joined|left|called|emailed|is on call|"
    r"is on leave|is out)\b|[ \t]*\((?:she|he|they)\b)")
_ROMAN = re.compile(r"^[IVXLC]+$")
_CYRILLIC = re.compile(r"^[\u0400-\u04ff'’-]+$")
_INITIALS = re.compile(r"^(?:[^\W\d_a-z]\.)+$")
_UP1, _LO1 = r"[^\W\d_a-z]", r"[^\W\d_A-Z]"  # one upper-case, one lower-case letter
_TITLE_WORD = re.compile(rf"^(?:{_UP1}['’])?{_UP1}{_LO1}+(?:['’-]?{_UP1}?{_LO1}+)*$")
_UPPER_WORD = re.compile(r"^[^\W\d_a-z]{2,}(?:['’-][^\W\d_a-z]{2,})*$")


def fold(word: str) -> str:
    """Lower case without accents: the gazetteer's spelling."""
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower())
                   if not unicodedata.combining(c))


@cache
def guesser_names() -> frozenset[str]:
    import gender_guesser.detector as gg  # ~1.7 s to load; once per process, at start
    return frozenset(fold(n) for n in gg.Detector(case_sensitive=False).names)


@cache
def given_names() -> frozenset[str]:
    """gender-guesser's names and Faker's of the locales users write in (given_names.txt),
    less the latter's common English words ("Major", "Story", "Royal")."""
    text = resources.files("services.redaction").joinpath("given_names.txt").read_text()
    added = {fold(w) for w in text.splitlines() if w and not w.startswith("#")}
    return guesser_names() | (added - dictionary_words())


@cache
def dictionary_words() -> frozenset[str]:
    """Common English words: WordNet's lemmas as the installed spaCy model's lemmatizer
    ships them (about 83,000). The redactor cannot run without a model either, so none
    installed fails here, naming the fix, rather than taking every word for a name."""
    from spacy.lookups import Lookups

    from services.redaction.nlp import spacy_model_path
    try:
        model = spacy_model_path("en_core_web_md")
    except RuntimeError:
        model = spacy_model_path("en_core_web_sm")
    table = Lookups().from_disk(Path(model) / "lemmatizer" / "lookups").get_table("lemma_index")
    return frozenset(fold(w) for words in table.values() for w in words)


def common_word(word: str) -> bool:
    """An English word of the dictionary, plural or not ("Notes", "Steps")."""
    w, words = fold(word), dictionary_words()
    return w in words or (w.endswith("s") and w[:-1] in words) or w in stop_words()


@cache
def tech_terms() -> frozenset[str]:
    text = resources.files("services.redaction").joinpath("tech_terms.txt").read_text()
    return frozenset(fold(w) for w in text.split() if not w.startswith("#"))


_NEXT_WORD = re.compile(r"(?:['’]s)?[ \t]+([a-z]+)")


def _more_words(text: str, pos: int) -> str:
    """The words written as a name that follow `pos` ("" when none do)."""
    m = _MORE_WORDS.match(text, pos)
    return m.group(0) if m is not None else ""  # never None: the pattern matches ""


def eponym(text: str, end: int) -> bool:
    """Whether the name ending at `end` names a thing after a person: "Monte Carlo
    sampler", "Cox models", "Bowman's capsule"."""
    m = _NEXT_WORD.match(text, end)
    return m is not None and m.group(1) in thing_words()


# Words after a name that make it a system's or product's, not a place: "the Orion
# ingestion cluster", "Atlas gateway", "Phoenix team".
SYSTEM_NOUNS = frozenset(str.split("""
cluster clusters service services pipeline pipelines api apis gateway gateways ingestion
dashboard dashboards team teams project projects bucket buckets node nodes database databases
db queue queues topic topics job jobs server servers instance instances replica replicas release
releases build builds app apps application applications platform backend frontend module modules
library sdk cli endpoint endpoints deployment deployments environment env stack repo repository
worker workers engine feature features migration rollout integration connector connectors plugin
tool tools portal index indexer scheduler cache proxy broker brokers consumer consumers producer
controller operator agent agents bot runner runners store warehouse lake console monitor alert
alerts sprint epic board channel workspace tenant namespace container containers image images
"""))
_SYSTEM_BEFORE = re.compile(r"(?i)(?<![a-z])(?:project|codename|code name|product|service|"
                            r"system|tool|app|team|cluster|release|operation)"
                            r"(?:[ \t]+|[_ -]?(?:name|id)?[\"']?[ \t]*[:=][ \t]*[\"']?)$")
_SYSTEM_WORD = re.compile(r"(?i)(?:project|codename|product|service|system|team|cluster|"
                          r"operation)[ \t]+")


def names_a_system(text: str, start: int, end: int) -> bool:
    """Whether a place-like name is a system's or product's: a system noun after it, a
    word like "project" or "codename" before it, or a short code in capitals before a
    number."""
    m = _NEXT_WORD_ANY.match(text, end)
    if m is not None and m.group(1).lower() in SYSTEM_NOUNS:
        return True
    if _CODE_BEFORE_NUMBER.search(text[start:end]) and re.match(r"[ \t#:-]*\d", text[end:]):
        return True  # "PO 4188185869", "SKU 1234": a record's code, not a place
    return bool(_SYSTEM_BEFORE.search(text, max(0, start - 24), start))


# A cell of a table, CSV or HTML row, or a label before a colon, is all its text.
_CELL_BEFORE = re.compile(r"(?:^|[|,;\t>])[ \t]*[\"']?$")
_CELL_AFTER = re.compile(r"[\"']?[ \t]*(?:[|,;\t<:]|$)", re.M)


def table_label(text: str, start: int, end: int) -> bool:
    """Whether a place-like word is a table's label, not a place: one dictionary word
    ("Bronze", "North", "Gold") that is a whole cell or a label before a colon. A place
    name that is no common word ("Jakarta", "Leeds") stays a place in any cell."""
    word = text[start:end]
    line = text.rfind("\n", 0, start) + 1
    return (word.isalpha() and common_word(word)
            and _CELL_BEFORE.search(text, line, start) is not None
            and _CELL_AFTER.match(text, end) is not None)


_CODE_BEFORE_NUMBER = re.compile(r"(?:^|\s)[A-Z]{2,4}$")
_NEXT_WORD_ANY = re.compile(r"(?:['’]s)?[ \t]+([A-Za-z]+)")


def names_a_thing(run: str) -> bool:
    """Whether a run of capitalised words holds a word that names a thing."""
    return any(fold(w.removesuffix("'s").removesuffix("’s")) in thing_words()
               for w in run.split())


@cache
def thing_words() -> frozenset[str]:
    """Words that end the name of a thing, not a person (thing_words.txt)."""
    text = resources.files("services.redaction").joinpath("thing_words.txt").read_text()
    return frozenset(w for line in text.splitlines() if not line.startswith("#")
                     for w in line.split())


_PARTICLE_WORD = re.compile(rf"^{PARTICLES}$", re.I)


def written_as_name(span: str) -> bool:
    """Every word capitalised (particles aside) and no word that names are never written
    as: a lower-case start (siRNA, statin, "S. cerevisiae"), brackets, or one all-caps
    word of five letters or more (CRISPR; short ones like UK stay, they may be places)."""
    words = span.split()
    if any(c in span for c in "()[]{}<>=/\\"):
        return False
    if len(words) == 1 and words[0].isupper() and len(words[0]) >= 5:
        return False
    return all(w[0].isupper() or _PARTICLE_WORD.match(w) for w in words if w[0].isalpha())


def _in_heading(text: str, pos: int) -> bool:
    """Whether `pos` lies on a Title Case line (six or more words, 80% capitalised): a
    heading, where capitals say nothing about names. Ticket titles are shorter and carry
    lower-case words ("Escalation from Anna Weber")."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return _heading_line(text[start:end if end >= 0 else len(text)])


@lru_cache(maxsize=512)
def _heading_line(line: str) -> bool:
    # Cached: every capitalised run of a line asks, and an abstract is one long line.
    words = [w for w in line.split() if w[0].isalpha()]
    return len(words) >= 6 and sum(w[0].isupper() for w in words) >= 0.8 * len(words)


@cache
def stop_words() -> frozenset[str]:
    """English function words some given-name lists also hold ("The", "An", "Will")."""
    from spacy.lang.en.stop_words import STOP_WORDS
    # Weekdays, and months that are not also given names (April, May, June ... are).
    calendar = ("january february march july september october november december monday "
                "tuesday wednesday thursday friday saturday sunday")
    return frozenset(fold(w) for w in (*STOP_WORDS, *calendar.split()))


def lower_case_words(text: str) -> frozenset[str]:
    """The words a text writes in lower case: common words, not names. Not the parts of
    an address or path ("anna.weber@example.com", "/home/weber")."""
    return frozenset(re.findall(
        r"(?<![\w'’@./:+-])[^\W\d_A-Z][\w'’-]*(?![\w'’-]|[@/]|\.\w)", text))


def _bare(word: str) -> str:
    """A signature word without its initial: "Hans-J." -> "Hans", "Weber." -> "Weber"."""
    word = word.rstrip(".")
    head, _, tail = word.rpartition("-")
    return head if head and len(tail) == 1 else word


def _is_given_name(word: str) -> bool:
    names = given_names()
    if word.isupper() or fold(word) in stop_words():  # acronyms (CI, HR) and function words
        return False
    return fold(word) in names or all(fold(p) in names for p in word.split("-"))


class NameRecognizer(LocalRecognizer):
    """PERSON from a given-names gazetteer, greetings, signatures and honorifics."""

    def __init__(self, allow_list: Iterable[str] = ()) -> None:
        super().__init__(supported_entities=["PERSON"], supported_language="en",
                         name="NameRecognizer")
        self.allowed = tech_terms() | {fold(w) for w in allow_list}

    def load(self) -> None:
        given_names()  # and dictionary_words(), which it filters with
        thing_words()
        stop_words()

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        return self._rules(text, lower_case_words(text))

    def _rules(self, text: str, lower: frozenset[str]) -> list[RecognizerResult]:
        """The rules' own findings; `lower`: the text's lower-case words."""
        spans: dict[tuple[int, int], str] = {}
        # A greeting word is no given name even where a list holds it ("Olá Joana", "Ola").
        greets = [(g.start(), g.start(1)) for g in _GREETING.finditer(text)]
        for m in _SEQUENCE.finditer(text):
            # The first known given name in a run of capitalised words starts a name
            # ("Customer Anna Weber") when a word written as a name follows it; every such
            # word after it belongs to it (a surname may well be "Faust" or "Spark"). A
            # given name alone ("April", "Candida", "Forest") is a name only where the
            # rules below say; a run that ends in a thing ("Summer Olympic Games",
            # "General Hospital") is no person.
            if _in_heading(text, m.start()):
                continue  # "Gene Content Of Ion Channels": every word is capitalised
            words = list(re.finditer(r"\S+", m.group(0)))
            if names_a_thing(m.group(0) + _more_words(text, m.end())):
                continue  # "San Francisco Young Men's Health Study"
            for k, w in enumerate(words[:-1]):
                word = w.group()
                if any(a <= m.start() + w.start() < b for a, b in greets):
                    continue
                if (word[0].isupper() and fold(word) not in self.allowed
                        and _is_given_name(word)):
                    end = k
                    for v in words[k + 1:]:
                        if not (_PARTICLE_WORD.match(v.group())
                                or (self.surname_like(v.group(), lower, tech_ok=True)
                                    and v.group().isupper() == word.isupper())):
                            break
                        end += 1
                    while end > k and _PARTICLE_WORD.match(words[end].group()):
                        end -= 1
                    first = k
                    if k and _CYRILLIC.match(words[k - 1].group()) and self.surname_like(
                            words[k - 1].group(), lower, tech_ok=True):
                        first = k - 1  # "Самойлова Анна Тимуровна": the surname first
                    if end > k or first < k:
                        spans.setdefault((m.start() + words[first].start(),
                                          m.start() + words[end].end()), "known given name")
                    break
        for m in _POSSESSIVE.finditer(text):  # "Anna's laptop"
            if names_a_thing(_more_words(text, m.end())):
                continue  # "Men's Health Study"
            if self.surname_like(m.group(1), lower) and _is_given_name(m.group(1)):
                spans.setdefault((m.start(1), m.end(1)), "given name, possessive")
        for m in _CLOSING_NATIVE.finditer(text):
            self._more_signing(text, m.end(), lower, spans)
        for m in _FULL_NAME_ACTS.finditer(text):  # "Wazir Baral rolled back the deploy"
            mention = m.group(1).split()
            start = m.start(1)
            while len(mention) > 2 and fold(mention[0]) in ROLES:
                start = text.index(mention[1], start + len(mention[0]))
                mention = mention[1:]
            if all(self.surname_like(w, lower) and fold(w) not in stop_words()
                   and fold(w) not in thing_words() for w in mention):
                spans.setdefault((start, m.end(1)), "full name, then an act")
        for rule, why in ((_GREETING, "greeting"), (_CLOSING, "signature"),
                          (_CLOSING_INLINE, "signature"), (_HONORIFIC, "honorific")):
            for m in rule.finditer(text):
                if not self.only_allowed(m.group(1)):
                    spans.setdefault((m.start(1), m.end(1)), why)
                if rule is _CLOSING:
                    self._more_signing(text, m.end(), lower, spans)
        for m in _NAME_FIELD.finditer(text):
            if (not _THING_FIELD.search(text[max(0, m.start() - 12):m.start()])
                    and self.field_name(m.group(1))):
                spans.setdefault((m.start(1), m.end(1)), "name field")
        for m in _CJK_INTRO.finditer(text):
            if all(self.surname_like(w, lower) and fold(w) not in thing_words()
                   and fold(w) not in ROLES for w in m.group(1).split()):
                spans.setdefault((m.start(1), m.end(1)), "introduced")
        for m in _HONORIFIC_AFTER.finditer(text):
            # a one-letter family name ("U Minsu 님") is judged by the given name after it
            judged = re.sub(r"^[^\W\d_][ \t]+", "", m.group(1))
            if self.speaker_name(judged, lower, honorific=True):
                spans.setdefault((m.start(1), m.end(1)), "honorific")
        for a, b, why in (*self.speakers(text, lower), *self.addressed(text, lower)):
            spans.setdefault((a, b), why)
        return [finding(self, "PERSON", a, b, SCORE, why)
                for (a, b), why in sorted(spans.items())]

    def speakers(self, text: str, lower: frozenset[str]) -> list[tuple[int, int, str]]:
        """Speaker labels of a text shaped like a chat: two or more lines that start with
        a time stamp or a <nick> and a speaker, or three or more "Name:" lines with one
        name at least twice (a form's "Note:", "Status:" lines do not repeat)."""
        lines = list(_LABEL_LINE.finditer(text))
        # Lines stamped in any script count: a chat may mix Latin and native names.
        stamped = max(sum(bool(m["stamp"] or m["nick"] or m["after"]) for m in lines),
                      len(_STAMPED_LINE.findall(text)))
        plain = [m["label"] for m in lines if not (m["stamp"] or m["nick"] or m["after"])]
        if stamped < 2 and not (len(plain) >= 3 and len(set(plain)) < len(plain)):
            return []
        out = []
        unsure = []
        for m in lines:
            group = "nick" if m["nick"] else "label"
            if self.speaker_name(m[group], lower, nick=group == "nick"):
                out.append((m.start(group), m.end(group), "speaker label"))
            elif m["stamp"] or m["after"]:
                unsure.append(m)
        # Where people speak (a label is a name, or in a script without case: "باسمة
        # السروري (19:06):"), a stamped label that is a dictionary word is one too ("Qadi");
        # in a log whose labels are components ("Scheduler", "Worker") none is.
        if unsure and (out or NATIVE.search(text)):
            out += [(m.start("label"), m.end("label"), "speaker label") for m in unsure
                    if self._stamped_speaker(m["label"], lower)]
        for m in _MENTION.finditer(text):
            if self.speaker_name(m.group(1), lower, nick=True):
                out.append((m.start(1), m.end(1), "mention"))
        return out

    def _stamped_speaker(self, label: str, lower: frozenset[str]) -> bool:
        """A time-stamped chat line's label that is a dictionary word ("Qadi (19:07):"):
        a person's unless it is a role, a team's, a thing's or a technology's word."""
        words = label.split()
        return len(words) <= 3 and all(
            _TITLE_WORD.match(w) and w.lower() not in lower and fold(w) not in stop_words()
            and fold(w) not in thing_words() and fold(w) not in self.allowed
            and fold(w) not in ROLES and fold(w) not in _SIGNATURE_TITLE for w in words)

    def addressed(self, text: str, lower: frozenset[str]) -> list[tuple[int, int, str]]:
        """Display names before an e-mail address, and names on the From/To/Cc lines of
        a text with at least two header lines."""
        out = []
        for m in _ADDRESSED.finditer(text):
            g = 1 if m.group(1) is not None else 2
            name = m.group(g).strip()
            words = [w.strip(",") for w in name.split()]
            if g == 1 and len(words) >= 2 and name.count(",") == 1:  # "Raman, Priya"
                words = [w for w in words if w]
            if self.speaker_name(" ".join(words), lower):
                a = m.start(g) + m.group(g).index(name)
                out.append((a, a + len(name), "e-mail address name"))
        if len(_HEADER_BLOCK.findall(text)) >= 2:
            for h in _HEADER.finditer(text):
                for m in _HEADER_NAME.finditer(h.group(1)):
                    if self.speaker_name(m.group(1), lower):
                        a = h.start(1) + m.start(1)
                        out.append((a, a + len(m.group(1)), "e-mail header"))
        return out

    def speaker_name(self, label: str, lower: frozenset[str], nick: bool = False,
                     honorific: bool = False) -> bool:
        """Whether a speaker label, nick or display name is a person's: no technology,
        function or field word ("Kafka", "Note", "Root Cause", "Agent"), and a known given
        name first or a word no dictionary holds. A nick may be written in lower case.
        Before an honorific a family name may be a stop word ("Gyeongsu No 님")."""
        if nick:
            words = [w for w in re.split(r"[._'’-]+", label) if w]
            if label.isupper() or label.lower() in _HTML_TAGS:
                return False
        else:
            words = [w for w in label.split() if not _PARTICLE_WORD.match(w)]
            if not words or not all(_TITLE_WORD.match(w) for w in words):
                return False  # "ERROR", "INFO", "iOS"
        if self.only_allowed(" ".join(words)) and not _is_given_name(words[0]):
            return False
        if any((fold(w) in stop_words() and not (honorific and i > 0))
               or fold(w) in thing_words() or fold(w) in self.allowed
               for i, w in enumerate(words)):
            return False
        if _is_given_name(words[0].capitalize()):
            return True
        # A nick's own lower-case spelling is no sign of a common word.
        return any(not common_word(w) and (nick or w.lower() not in lower) for w in words)

    def field_name(self, value: str) -> bool:
        """Whether a name field's value is a person's name: words written as names, none a
        function or thing word, and a known given name first or a word that is neither a
        dictionary word nor a technology word ("Aurora Monteiro": Aurora is a database too,
        Monteiro is no word), or a particle between them ("Thales da Costa")."""
        words = [w for w in value.split() if not _PARTICLE_WORD.match(w)]
        if not words or not all(_TITLE_WORD.match(w) for w in words):
            return False
        if any(fold(w) in thing_words() for w in words) or all(
                fold(w) in stop_words() for w in words):
            return False  # "Cunja An": a name's word may be a stop word elsewhere
        if _is_given_name(words[0]) and fold(words[0]) not in self.allowed:
            return True
        if len(words) >= 2 and len(value.split()) > len(words) and \
                not _PARTICLE_WORD.match(value.split()[0]):
            return True  # a particle between its words: "Thales da Costa"
        return any(not common_word(w) and fold(w) not in self.allowed for w in words)

    def _more_signing(self, text: str, end: int, lower: frozenset[str],
                      spans: dict[tuple[int, int], str]) -> None:
        """The lines after a signature's name (ending at `end`) that are names too: up to
        three more people sign, a line each."""
        more = _SIGNED_TOO.match(text, end)
        for _ in range(3):
            if more is None or not self._signs_too(more.group(1).split(), lower):
                return
            spans.setdefault((more.start(1), more.end(1)), "signature")
            more = _SIGNED_TOO.match(text, more.end())

    def _signs_too(self, line: list[str], lower: frozenset[str]) -> bool:
        """Whether the words of a signature's second line are a name, not a title: the
        first a given name or no English word, or the others none ("Site Reliability"), the
        others written as names (after a given name a surname may be a word: "Yeongsug
        Go"), none a role. Initials and connectors between the words are passed over; a
        given name that is also a technology ("Cassandra Young") is one when a surname
        follows it."""
        words = [_bare(w) for w in line if w[:1].isupper() and not _INITIAL.match(w)]
        if len(words) < 2 and not (words and len(line) > 1):  # "Hans D.": a name and initial
            return False
        first = fold(words[0])
        given_thing = ((first in thing_words() or first in self.allowed)
                       and _is_given_name(words[0]) and len(words) > 1
                       and not any(fold(w) in thing_words() or fold(w) in self.allowed
                                   for w in words[1:]))
        # a given name that is also a word ("Tit Nikolaev") is told by a surname after it
        rest_names = not any(common_word(w) for w in words[1:])  # "Go Hyeonjeong"
        return (self.surname_like(words[0], lower, tech_ok=given_thing)
                and (first not in stop_words() or rest_names)
                and (first not in thing_words() or given_thing)
                and (_is_given_name(words[0]) or not common_word(words[0]) or rest_names)
                and all(self.surname_like(w, lower, tech_ok=True) for w in words[1:])
                and not any(fold(w) in ROLES or fold(w) in _SIGNATURE_TITLE
                            or (fold(w) in thing_words() and not (given_thing and i == 0))
                            for i, w in enumerate(words)))

    def surname_like(self, word: str, lower: frozenset[str], tech_ok: bool = False) -> bool:
        """Written as a name (Weber, McDonald, O'Brien, WEBER), not a technology word
        (unless `tech_ok`: after a given name, "Walentina Faust"), and not a word the text
        also uses in lower case ("Content" beside "content")."""
        return (bool(_TITLE_WORD.match(word) or _UPPER_WORD.match(word))
                and (tech_ok or fold(word) not in self.allowed)
                and word.lower() not in lower)

    def resolve(self, text: str, results: list[RecognizerResult]) -> list[RecognizerResult]:
        """Every finding of one text with NER's PERSON findings kept only where they have
        support (module docstring), and the rules' own findings added."""
        lower = lower_case_words(text)
        rules = self._rules(text, lower)
        out: list[RecognizerResult] = []
        ner: list[RecognizerResult] = []
        for r in results:
            for p in self.refine(text, r):
                if p.entity_type == "PERSON":
                    ner.append(p)
                else:
                    out.append(p)
        known = {fold(w) for r in rules for w in text[r.start:r.end].split()}
        lone = []
        for r in ner:
            words = text[r.start:r.end].split()
            if len(words) == 1:
                lone.append(r)
            elif self.full_name(text, r, words, lower):
                out.append(r)
                known.update(fold(w) for w in words)
        for r in lone:
            word = text[r.start:r.end]
            if not self.surname_like(word, lower):
                continue
            if (fold(word) in known or _is_given_name(word)
                    or _CUE_BEFORE.search(text, max(0, r.start - 40), r.start)
                    or _CUE_AFTER.match(text, r.end)):
                out.append(r)
        # "Project Ingrid", "the Rosalind ingestion cluster", "owner_team: Clara": a system
        # named after a person is no person.
        out = [r for r in out if not (r.entity_type == "PERSON" and (
                   eponym(text, r.end) or _SYSTEM_WORD.match(text, r.start, r.end)
                   or names_a_system(text, r.start, r.end)))
               and not (r.entity_type == "LOCATION" and (
                   names_a_system(text, r.start, r.end) or table_label(text, r.start, r.end)
                   or version(text[r.start:r.end])  # "Firmware 6694.151", "Release 2.1"
                   or _SYSTEM_WORD.match(text, r.start, r.end)))]
        rules = [r for r in rules if not (eponym(text, r.end) or _SYSTEM_WORD.match(
            text, r.start, r.end) or names_a_system(text, r.start, r.end))]
        places = [r for r in out if r.entity_type == "LOCATION"]
        rules = [r for r in rules if not any(  # "San Francisco" is a place, not "San"
            p.start <= r.start and r.end <= p.end for p in places)]
        others = [r for r in out if r.entity_type != "PERSON"]
        native = [finding(self, "PERSON", a, b, SCORE, why)
                  for a, b, why in native_name_spans(text)]
        people = rules + native + self.introduced(text, lower) + [
            r for r in out if r.entity_type == "PERSON"]
        return others + people + self.mentioned_again(text, people, lower)

    def introduced(self, text: str, lower: frozenset[str]) -> list[RecognizerResult]:
        """Names right after words that introduce a person ("Thanks to Summer")."""
        out = []
        for m in _INTRO.finditer(text):
            words = list(re.finditer(r"\S+", m.group(1)))
            end = -1
            for k, w in enumerate(words):
                word = w.group()
                if _PARTICLE_WORD.match(word) and k:
                    continue
                if (not self.surname_like(word, lower) or word.isupper()
                        or fold(word) in stop_words()
                        or fold(word) in thing_words()):
                    break
                end = k
            if end >= 0:
                out.append(finding(self, "PERSON", m.start(1), m.start(1) + words[end].end(),
                                   SCORE, "introduced"))
        return out

    def mentioned_again(self, text: str, found: list[RecognizerResult],
                        lower: frozenset[str]) -> list[RecognizerResult]:
        """Every other place a word of a name found in the text stands alone ("Joshua
        Ward ... Ward acknowledged it"): a word of a full name, or a lone name where a
        speaker label, mention, address, greeting or signature says it is one (a lone NER
        word is too weak to spread). A word no dictionary holds is found in any case
        ("priya", "@raman"); others only as written, and not when the text also writes
        them in lower case."""
        words: set[str] = set()
        for r in found:
            named = [w.strip(",;:.") for w in re.split(r"[\s._]+", text[r.start:r.end])
                     if not (_PARTICLE_WORD.match(w) or _INITIALS.match(w))]
            why = r.analysis_explanation.textual_explanation if r.analysis_explanation else ""
            if len(named) > 1 or why in STRONG:
                words.update(w for w in named if not w.isupper()
                             and (len(w) > 2 or not common_word(w)))  # "Wu", not "De"
        out = []
        for w in sorted(words):
            if fold(w) in stop_words() or fold(w) in self.allowed or (
                    common_word(w) and not self.surname_like(w, lower)):
                continue
            flags = re.I if not common_word(w) else 0
            for m in re.finditer(rf"(?<![\w'’-]){re.escape(w)}(?![\w-])", text, flags):
                out.append(finding(self, "PERSON", m.start(), m.end(), SCORE, "named again"))
        return out

    def full_name(self, text: str, r: RecognizerResult, words: list[str],
                  lower: frozenset[str]) -> bool:
        """Whether a span of several words NER took for a person can be one."""
        if _in_heading(text, r.start) or fold(words[-1]) in thing_words():
            return False
        named = [w for w in words if not (_PARTICLE_WORD.match(w) or _INITIALS.match(w))]
        if all(w.isupper() for w in named) and any(  # "RNP IC", "II CRISPR": acronyms
                len(w) < 3 or _ROMAN.match(w) for w in named):
            return False
        if named and all(map(common_word, named)) and not _is_given_name(named[0]):
            return False  # "Site Reliability", "Baker Street"
        return bool(named) and all(
            self.surname_like(w, lower) and fold(w) not in stop_words() for w in named)

    def refine(self, text: str, r: RecognizerResult) -> list[RecognizerResult]:
        """Another recognizer's finding, with NER's PERSON and LOCATION spans trimmed to
        what can be a name: one line or table cell at a time, lines dropped that hold digits, only
        technology words, or words no name is written as (NER reads "Tom Lloyd\n+44 161
        496 0932", "Kafka Connect", "siRNA", "mTOR" or "S. cerevisiae" as people)."""
        if r.entity_type not in ("PERSON", "LOCATION"):
            return [r]
        out = []
        pos = r.start
        # A table's cells are apart as lines are ("| Item | Firmware 6.1 |").
        for line in re.split(r"[\n|\t]", text[r.start:r.end]):
            stripped = line.strip(" \t,;:")
            if stripped and not self.only_allowed(stripped) and written_as_name(stripped):
                a = pos + line.index(stripped)
                out.append(RecognizerResult(r.entity_type, a, a + len(stripped), r.score,
                                            r.analysis_explanation, r.recognition_metadata))
            pos += len(line) + 1
        return out

    def only_allowed(self, span: str) -> bool:
        """Not a person: a span made only of allowed (technology) words, one holding a
        digit, or a lone acronym ("CI", "SRE")."""
        words = re.findall(r"[\w'’-]+", span)
        acronym = len(words) == 1 and words[0].isupper() and len(words[0]) <= 4
        return (acronym or any(c.isdigit() for c in span)
                or all(fold(w) in self.allowed for w in words))
