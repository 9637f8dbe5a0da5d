"""Person names written in scripts without letter case: Devanagari, Arabic, Chinese,
Japanese and Korean, and names in a table's or record's name field in any script.

The English NER model and the capital-letter rules of names.py see nothing in `张伟`,
`이윤서` or `अवनी मेनन`. What says that such a run is a name is where it stands, as for
Latin names: a chat's speaker label (`[09:28] 이윤서: hi`), an honorific or a greeting
(`张先生`, `木村様`, `민준님`, `श्री अवनी`, `السيدة لوليا`), a closing's next line, an
e-mail display name, a name field (`"name": "张英"`, `姓名：张英`, a CSV or Markdown table
column headed `name`). In running text a run is a name where a family name of the list
(native_names.txt: Faker's lists of these locales) is followed by a listed given name.
Every name so found is found again wherever else the text writes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from importlib import resources

# Letters and marks only: the danda (।) and Arabic's comma, semicolon and question mark
# end a name.
_DEVA, _ARAB = "\u0900-\u0963\u0966-\u097f", "\u0621-\u065f\u066e-\u06d3\u06d5-\u06ff\u0750-\u077f"
_HAN, _KANA, _HANG = "\u4e00-\u9fff\u3400-\u4dbf\u3005", "\u3041-\u30ff", "\uac00-\ud7a3"
NATIVE = re.compile(f"[{_DEVA}{_ARAB}{_HAN}{_KANA}{_HANG}]")
# A word of one of these scripts (Devanagari and Arabic words include their marks).
_WORD = rf"(?:[{_DEVA}]+(?:[’'][{_DEVA}]+)*|[{_ARAB}]+|[{_HAN}{_KANA}]{{1,6}}|[{_HANG}]{{2,5}})"
_RUN = rf"{_WORD}(?:[ \t・·]{_WORD}){{0,3}}"
_STAMP = (r"(?:\[[^\]\n]{0,24}?\d{1,2}:\d{2}[^\]\n]{0,12}\]|"
          r"(?:\d{4}-\d{2}-\d{2}[ T]|\d{1,2}[/.]\d{1,2}[/.]\d{2,4},?[ \t])?"
          r"\d{1,2}:\d{2}(?::\d{2})?(?:[ \t]?[AaPp]\.?[Mm]\.?)?)")
_LABEL = re.compile(rf"(?m)^[ \t]*(?:(?P<stamp>{_STAMP})[ \t]*(?:[-–|][ \t]*)?)?"
                    rf"(?P<label>{_RUN})"
                    rf"(?:[ \t]*[(（](?P<after>\d{{1,2}}:\d{{2}}(?::\d{{2}})?)[)）])?[ \t]*[:：]")
_STAMPED_LINE = re.compile(rf"(?m)^[ \t]*{_STAMP}")
# An IRC-style chat line: "<विद्या डी’सोउज़ा> अभी देख रहा हूँ".
_NICK_LINE = re.compile(rf"(?m)^[ \t]*(?:{_STAMP}[ \t]*)?<(?P<label>{_RUN})>")
_STAMP_AFTER = re.compile(r"(?m)^[^\n:()（）]{1,40}[(（]\d{1,2}:\d{2}(?::\d{2})?[)）][ \t]*[:：]")
# Words that head a line as a field, not a speaker ("备注：", "상태:", "नोट:").
FIELD_WORDS = frozenset(str.split(
    "备注 状态 注意 错误 原因 时间 日期 主题 系统 机器人 管理员 结果 问题 说明 地址 电话 邮箱 "
    "備考 状態 エラー 件名 日時 内容 システム 結果 問題 住所 メール 電話 "
    "참고 상태 오류 원인 시간 날짜 제목 시스템 결과 문제 주소 전화 이메일 메모 "
    "नोट स्थिति त्रुटि कारण समय तारीख विषय सिस्टम परिणाम पता फ़ोन ईमेल "
    "ملاحظة الحالة خطأ السبب الوقت التاريخ الموضوع النظام النتيجة العنوان الهاتف"))
_AFTER_HAN = ("先生|女士|小姐|老师|老師|经理|經理|总监|總監|主任|同学|同學|"
              "様|さま|さん|くん|君|ちゃん|殿|部長|課長|社長|氏")
_HONORIFIC_AFTER = re.compile(
    rf"(?P<han>[{_HAN}{_KANA}]{{1,6}})(?:{_AFTER_HAN})|"
    rf"(?<![{_HANG}])(?P<hang>[{_HANG}]{{2,4}})[ \t]?(?:님께|님|씨|선생님|팀장님|과장님|부장님|"
    rf"대리님|고객님|매니저님|드림|올림)(?:께|에게|께서)?(?![{_HANG}])|"
    rf"(?P<deva>[{_DEVA}]+(?:[ \t][{_DEVA}]+)?)[ \t]?जी(?![{_DEVA}])")
_HONORIFIC_BEFORE = re.compile(
    rf"(?:श्रीमती|श्रीमान|श्री|सुश्री|कुमारी|डॉ\.?|प्रिय|आदरणीय)[ \t]+"
    rf"(?P<deva>[{_DEVA}]+(?:[ \t][{_DEVA}]+)?)|"
    rf"(?:السيدة|السيد|الآنسة|الأستاذة|الأستاذ|الدكتورة|الدكتور|المهندسة|المهندس|عزيزتي|عزيزي)"
    rf"[ \t]+(?P<arab>[{_ARAB}]+(?:[ \t][{_ARAB}]+){{0,2}})|"
    rf"(?:尊敬的|亲爱的|親愛的|致)[ \t]*(?P<han>[{_HAN}]{{2,4}})")
_FAMILY_APART = re.compile(rf"(?<![{_HAN}])(?P<family>[{_HAN}]{{1,3}})[ \t\u3000]$")
# Greetings whose next word is a name only when the list knows it ("नमस्ते दोस्तों" is
# "hello friends").
_GREETING = re.compile(
    rf"(?:नमस्ते|नमस्कार|धन्यवाद|مرحبا|مرحباً|أهلا|شكرا|شكراً|안녕하세요|감사합니다|你好|您好)"
    rf"[ \t,，、،]+(?P<name>{_WORD}(?:[ \t]{_WORD})?)")
_FIELD = re.compile(
    rf"(?i)[\"']?(?:name|full[_ ]?name|customer(?:[_ ]name)?|contact(?:[_ ]name)?|"
    rf"user[_ ]?name|author|owner|assignee|reporter|sender|姓名|名前|氏名|联系人|聯絡人|担当者?|"
    rf"이름|성명|담당자|नाम|الاسم|nome|nombre)[\"']?[ \t]*[:：=][ \t]*[\"']?"
    rf"(?P<name>{_RUN})")
# Words that introduce a person in the served languages' own scripts: "已升级给孙丹丹",
# "该工单由黄雪于周一创建" (its letters apart too: "由温 岩于"), "تم التصعيد إلى عماد العفيفي",
# "... को असाइन".
_INTRO = re.compile(
    rf"(?:由|给|交给|转给|升级给|联系|感谢|抄送|负责人|經由|轉給)[ \t]*"
    rf"(?P<han>[{_HAN}](?:[ \t]?[{_HAN}]){{1,3}})"
    rf"(?=[于於在，,。、 的已将]|$)|"
    rf"(?:التصعيد إلى|تصعيد إلى|تحويل إلى|إحالة إلى|بواسطة|من قبل|شكرا لـ?|مع)[ \t]+"
    rf"(?P<arab>[{_ARAB}]+(?:[ \t][{_ARAB}]+){{0,2}})|"
    rf"(?<![{_DEVA}])(?P<deva>[{_DEVA}]+[ \t][{_DEVA}]+(?:[’'][{_DEVA}]+)?)[ \t]+(?:ने|को)[ \t]")
# A greeting line that is a name and an honorific or 您好: "浩様", "雪，您好：".
_GREETING_LINE = re.compile(
    rf"(?m)^[ \t]*(?P<han>[{_HAN}{_KANA}]{{1,4}})[ \t]*(?:(?:様|さま|さん|殿)[ \t]*[,，、]?"
    rf"|[,，、]?[ \t]*(?:您好|你好))[ \t]*[:：!！]?[ \t]*$")
_CLOSING = re.compile(
    r"(?m)^[ \t]*(?:(?:此致[ \t]*\n[ \t]*)?(?:敬礼|敬禮)|此致|谢谢|謝謝|"
    r"よろしくお願い(?:いた)?します。?|以上|감사합니다\.?|"
    r"수고하세요\.?|धन्यवाद|सादर|शुभकामनाओं सहित|مع التحية|مع خالص التحيات|شكرا|شكراً|"
    r"(?i:thanks|thank you|best regards|kind regards|regards|best|cheers))[ \t,，、،!]*\n"
    rf"[ \t]*(?P<name>{_RUN})[ \t]*(?:드림|올림|拝)?[ \t]*$")
_ADDRESSED = re.compile(rf"(?P<name>{_RUN})[ \t]*<[^<>\s@]+@[^<>\s]+>")
_CELL_SPLIT = re.compile(r"[ \t]*(?:\||,|;|\t)[ \t]*")
NAME_HEADERS = re.compile(r"(?i)^(?:name|full[ _]?name|customer(?:[ _]name)?|contact|"
                          r"owner|assignee|reporter|姓名|名前|氏名|이름|성명|नाम|الاسم|"
                          r"имя|фио|nome|nombre|name des kunden)$")
_SPLIT = re.compile(r"\s+")


@cache
def native_names() -> tuple[frozenset[str], frozenset[str]]:
    """(given names, family names) of native_names.txt."""
    text = resources.files("services.redaction").joinpath("native_names.txt").read_text()
    given: set[str] = set()
    family: set[str] = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            kind, name = line.split("\t")
            (given if kind == "given" else family).add(name)
    return frozenset(given), frozenset(family)


@cache
def _prose_pattern() -> re.Pattern[str]:
    """A family name then a given name, in Han/Kana or Hangul (no spaces; a Japanese
    particle may stand right before: "に高橋くみ子が"), or in Devanagari or Arabic words
    (either order there, the given name first)."""
    given, family = native_names()

    def alt(names: frozenset[str], chars: str) -> str:
        kept = [n for n in names if re.fullmatch(f"[{chars}]+", n.replace(" ", ""))]
        return "|".join(sorted(map(re.escape, kept), key=len, reverse=True))

    east = f"{_HAN}{_KANA}"
    return re.compile(
        rf"(?:(?<![{east}])|(?<=[にはがをとでもへ]))"
        rf"(?P<han>(?:{alt(family, east)})[ \t　]?(?:{alt(given, east)}))"
        rf"(?=[^{east}]|$|[说表示的在已和与是将也都回答认为提出负责确认がは の さ 様 先])|"
        rf"(?<![{_HANG}])(?P<hang>(?:{alt(family, _HANG)})(?:{alt(given, _HANG)}))|"
        rf"(?<![{_DEVA}])(?P<deva>(?:{alt(given, _DEVA)})[ \t]+(?:{alt(family, _DEVA)}))"
        rf"(?:जी)?(?![{_DEVA}])|"
        rf"(?<![{_ARAB}])(?P<arab>(?:{alt(given, _ARAB)})[ \t]+(?:{alt(family, _ARAB)}))"
        rf"(?![{_ARAB}])")


def _family_first(run: str) -> bool:
    """A Han or Hangul run that starts with a listed family name."""
    family = native_names()[1]
    return any(run.startswith(f) for f in family)


def native_name_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, why) of every name the rules find, found again elsewhere."""
    spans = list(_table_names(text))
    if NATIVE.search(text):
        spans += _cued(text)
        spans += [(m.start(g), m.end(g), "listed names") for m in
                  _prose_pattern().finditer(text) for g in ("han", "hang", "deva", "arab")
                  if m.group(g)]
    return spans + _again(text, spans)


def _cued(text: str) -> list[tuple[int, int, str]]:
    out = []
    labels = list(_LABEL.finditer(text))
    # lines stamped before the label, or after it in any script ("Daksh Chauhan (12:35):")
    stamped = len(_STAMPED_LINE.findall(text)) + len(_STAMP_AFTER.findall(text))
    plain = [m["label"] for m in labels if not (m["stamp"] or m["after"])]
    chat = stamped >= 2 or (len(plain) >= 2 and len(set(plain)) < len(plain))
    for m in labels if chat else []:
        if m["label"] not in FIELD_WORDS and (m["stamp"] or m["after"] or stamped < 2):
            out.append((m.start("label"), m.end("label"), "speaker label"))
    nicks = list(_NICK_LINE.finditer(text))
    if len(nicks) >= 2:
        out += [(m.start("label"), m.end("label"), "speaker label") for m in nicks
                if m["label"] not in FIELD_WORDS]
    given = native_names()[0]
    for m in _HONORIFIC_AFTER.finditer(text):
        if m["han"] is not None:
            name = _han_name(m["han"])
            end = m.end("han")
            # "松田 くみ子さん": a listed family name, a space, then the given name
            apart = _FAMILY_APART.search(text, max(0, m.start("han") - 4), m.start("han"))
            if apart is not None and apart["family"] in native_names()[1]:
                out.append((apart.start("family"), end, "honorific"))
            elif name:
                out.append((end - len(name), end, "honorific"))
        elif m["hang"] is not None and (_family_first(m["hang"]) or m["hang"] in given):
            out.append((m.start("hang"), m.end("hang"), "honorific"))
        elif m["deva"] is not None:
            words = m["deva"].split()
            if text[m.end("deva"):m.end("deva") + 1] != " " and words[-1] not in given:
                continue  # "भेजी" (sent) ends in जी too: attached, only to a listed name
            start = m.start("deva") if words[0] in given else m.end("deva") - len(words[-1])
            out.append((start, m.end("deva"), "honorific"))
    for m in _HONORIFIC_BEFORE.finditer(text):
        group = next(g for g in ("deva", "arab", "han") if m.group(g))
        name = {"arab": _arabic_name, "deva": _deva_name}.get(group, str)(m[group])
        end = m.start(group) + len(name)
        out.append((m.start(group), _bracketed(text, end, name) if group == "arab" else end,
                    "honorific"))
    family = native_names()[1]
    for m in _INTRO.finditer(text):
        if m["han"] is not None and m["han"] not in FIELD_WORDS and (
                m["han"][0] in family or m["han"][:2] in family):
            out.append((m.start("han"), m.end("han"), "introduced"))
        elif m["arab"] is not None:
            name = _arabic_name(m["arab"])
            end = _bracketed(text, m.start("arab") + len(name), name)
            if name.split()[0] in given or end > m.start("arab") + len(name) \
                    or len(name.split()) > 1:
                out.append((m.start("arab"), end, "introduced"))
        elif m["deva"] is not None and (m["deva"].split()[0] in given
                                        or m["deva"].split()[1] in family):
            out.append((m.start("deva"), m.end("deva"), "introduced"))
    for m in _GREETING.finditer(text):
        words = m["name"].split()
        if words[0] in given or _family_first(m["name"]):
            name = words[0] if len(words) > 1 and words[1] == "जी" else m["name"]
            out.append((m.start("name"), m.start("name") + len(name), "greeting"))
    out += [(m.start("han"), m.end("han"), "greeting") for m in _GREETING_LINE.finditer(text)
            if m["han"] not in FIELD_WORDS]
    for rule, why in ((_FIELD, "name field"), (_CLOSING, "signature"),
                      (_ADDRESSED, "e-mail address name")):
        for m in rule.finditer(text):
            if m["name"] not in FIELD_WORDS:
                out.append((m.start("name"), m.end("name"), why))
    return out


# Hindi postpositions and particles that follow a name ("श्री ऋत्विक ने ...").
_HINDI_PARTICLES = frozenset(str.split("ने को से का की के में पर और जी ही भी तक है हैं था थे थी"))


def _deva_name(run: str) -> str:
    words = run.split()
    return " ".join(words[:2]) if len(words) > 1 and words[1] not in _HINDI_PARTICLES \
        else words[0]


_ARABIC_LINKS = ("آل", "أبو", "ابو", "بن", "ابن", "بنت")


def _arabic_name(run: str) -> str:
    """The name at the start of Arabic words after an honorific: the given name, and the
    family name after it when listed or written as one (`ال...`, `آل ...`, `أبو ...`)."""
    given, family = native_names()
    words = run.split()
    keep = 1
    if len(words) > 1:
        if words[1] in _ARABIC_LINKS and len(words) > 2:
            keep = 3
        elif words[1] in family or words[1].startswith("ال") or \
                " ".join(words[1:3]) in family:
            keep = 3 if " ".join(words[1:3]) in family else 2
    return " ".join(words[:keep])


# A family (or tribe) name in brackets after the name: "روفيدا عجرمة (العجارمة)".
_ARAB_BRACKET = re.compile(rf"(?P<family>[ \t]+[{_ARAB}]+)?[ \t]*[(（][ \t]*[{_ARAB}]+"
                           rf"(?:[ \t][{_ARAB}]+)?[ \t]*[)）]")


def _bracketed(text: str, end: int, name: str) -> int:
    """The end of an Arabic name found ending at `end`, with the family name and the one in
    brackets after it: a given name alone takes the next word and the brackets, a name of
    two words or more the brackets."""
    m = _ARAB_BRACKET.match(text, end)
    if m is None or (m["family"] is None) == (len(name.split()) == 1):
        return end
    return m.end()


def _han_name(run: str) -> str:
    """The name that ends `run` (text before an honorific): a listed family name and at
    most two more characters or a listed given name ("高橋くみ子"), the longest such
    tail; kana runs whole, four at most."""
    if re.fullmatch(f"[{_KANA}]+", run):
        return run[-4:]
    given, family = native_names()
    for size in range(min(len(run), 6), 0, -1):
        tail = run[-size:]
        if any(tail.startswith(f) and (size - len(f) <= 2 or tail[len(f):] in given)
               for f in family if len(f) <= size):
            return tail
    return ""


def _table_names(text: str) -> Iterator[tuple[int, int, str]]:
    """Cells of a CSV or Markdown table column headed `name` (in any of the served
    languages), in any script."""
    if "\n" not in text or not re.search(r"[,|;\t]", text):
        return
    lines = list(re.finditer(r"[^\n]+", text))
    for k, line in enumerate(lines):
        cells = _cells(line.group())
        column = next((i for i, (_, c) in enumerate(cells) if NAME_HEADERS.match(c)), None)
        if column is None or len(cells) < 2:
            continue
        for row in lines[k + 1:]:
            if set(row.group().strip()) <= set("|-: "):
                continue  # a Markdown rule line
            values = _cells(row.group())
            if len(values) != len(cells):
                break
            start, value = values[column]
            if value and not any(ch.isdigit() for ch in value) and "@" not in value:
                yield row.start() + start, row.start() + start + len(value), "name column"


def _cells(line: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    body = line
    for m in [*_CELL_SPLIT.finditer(body), None]:
        end = m.start() if m is not None else len(body)
        cell = body[pos:end]
        stripped = cell.strip().strip("\"'")
        out.append((pos + cell.find(stripped) if stripped else pos, stripped))
        pos = m.end() if m is not None else end
    if line.lstrip().startswith("|"):
        out = out[1:]
    if line.rstrip().endswith("|"):
        out = out[:-1]
    return out


def _again(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Every other place where a native-script name found stands (whole, or one of its
    words of two or more characters)."""
    given = native_names()[0]
    names: set[str] = set()
    for a, b, _ in spans:
        value = text[a:b]
        if NATIVE.search(value):
            names.add(value)
            # A listed given name alone; not a family name ("सरकार" is also "government").
            names.update(w for w in _SPLIT.split(value) if len(w) >= 2 and w in given)
    out = []
    for name in sorted(names, key=len, reverse=True):
        for m in re.finditer(re.escape(name), text):
            out.append((m.start(), m.end(), "named again"))
    return out
