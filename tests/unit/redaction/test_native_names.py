"""Names in Devanagari, Arabic, Chinese, Japanese, Korean and Cyrillic: found where they
stand (speaker labels, honorifics, greetings, signatures, name fields and columns, e-mail
display names) whether a list knows them or not, in running text where the list knows
the family and the given name, and found again elsewhere; field words and ordinary
words of those scripts stay."""

from __future__ import annotations

import pytest

from services.redaction.native_names import native_name_spans, native_names
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionSettings())


def names_in(text: str) -> set[str]:
    return {text[a:b] for a, b, _ in native_name_spans(text)}


# Names no list here holds: only their place says they are names.
UNLISTED = {"han": "欧阳梓萱", "hang": "남궁별하", "deva": "ऋत्विक", "arab": "زينب"}


def test_the_unlisted_names_are_not_in_the_list() -> None:
    given, family = native_names()
    assert not {UNLISTED["deva"], UNLISTED["arab"], UNLISTED["hang"][2:]} & given
    assert UNLISTED["han"] not in family | given


@pytest.mark.parametrize(("text", "names"), [
    ("[09:28] 이윤서: 배포 실패했어요\n[09:29] 남궁별하: 확인할게요\n[09:30] 이윤서: 고마워요",
     {"이윤서", "남궁별하"}),
    ("2026-02-25 09:14 欧阳梓萱：支付服务又挂了\n2026-02-25 09:15 王小明：我看一下",
     {"欧阳梓萱", "王小明"}),
    ("09:14 ऋत्विक: deploy failed\n09:15 अवनी मेनन: checking", {"ऋत्विक", "अवनी मेनन"}),
    ("[10:01] زينب: the export failed\n[10:02] Anna Weber: on it", {"زينب"}),
])
def test_chat_speaker_labels_in_every_script(text: str, names: set[str]) -> None:
    assert names <= names_in(text), names_in(text)


@pytest.mark.parametrize(("text", "name"), [
    ("请联系欧阳梓萱女士确认退款。", "欧阳梓萱"),
    ("尊敬的王小明：\n您的订单已发货。", "王小明"),
    ("木村様\nいつもお世話になっております。", "木村"),
    ("남궁별하님, 요청하신 내용을 확인했습니다.", "남궁별하"),
    ("श्री ऋत्विक ने पुष्टि की।", "ऋत्विक"),
    ("नमस्ते ऋत्विक जी, कृपया देखें।", "ऋत्विक"),
    ("السيدة زينب أكدت الإصلاح", "زينب"),
    ('{"customer": {"name": "欧阳梓萱", "tier": "gold"}}', "欧阳梓萱"),
    ("姓名：欧阳梓萱\n电话：138", "欧阳梓萱"),
    ("이름: 남궁별하", "남궁별하"),
    ("From: 남궁별하 <star@example.kr>\nTo: ops@example.kr", "남궁별하"),
    ("问题已解决。\n此致\n敬礼\n欧阳梓萱", "欧阳梓萱"),
    ("감사합니다.\n남궁별하 드림", "남궁별하"),
    ("id,name,tier\n1,欧阳梓萱,gold\n2,Zorvanta Kepuli,silver", "欧阳梓萱"),
    ("| 이름 | 등급 |\n|---|---|\n| 남궁별하 | gold |", "남궁별하"),
    ("该工单由温 岩于周一创建。", "温 岩"),  # its letters apart
])
def test_names_where_they_stand(text: str, name: str) -> None:
    assert name in names_in(text), names_in(text)


def test_a_name_column_holds_names_of_any_script() -> None:
    text = "id,name,tier\n1,欧阳梓萱,gold\n2,Zorvanta Kepuli,silver\n3,,bronze"
    assert {"欧阳梓萱", "Zorvanta Kepuli"} <= names_in(text)


def test_listed_names_in_running_text_and_found_again() -> None:
    given, family = native_names()
    assert {"余", "张", "양", "木村"} <= family and {"桂芳", "英", "지혜", "陽一"} <= given
    text = "余桂芳说系统已恢复。明天再和余桂芳确认。양지혜 님이 확인했습니다. 木村 陽一さんへ"
    assert {"余桂芳", "양지혜", "木村 陽一"} <= names_in(text)
    again = "[09:28] 이윤서: hi\n[09:29] 남궁별하: hello\n지금 이윤서 확인 중"
    assert sum(1 for a, b, _ in native_name_spans(again) if again[a:b] == "이윤서") >= 2


def test_field_words_and_ordinary_words_stay() -> None:
    for text in ("注意: 系统维护\n备注: 无\n状态: 完成", "王国的历史很长", "高强度测试已完成",
                 "상태: 완료\n참고: 없음\n오류: 없음", "सरकार ने कहा कि काम पूरा हुआ",
                 "नमस्ते दोस्तों, आज की बैठक", "مرحبا بكم في النظام", "今日は晴れです",
                 "이메일로 보내주세요"):
        assert names_in(text) == set(), (text, names_in(text))


def test_cyrillic_names_by_gazetteer_greeting_and_signature(redactor: Redactor) -> None:
    text = ("Здравствуйте, Анна!\nСамойлова Анна Тимуровна подтвердила исправление.\n"
            "С уважением,\nИван Петров")
    (out,) = redactor.redact_texts([text])
    for word in ("Анна", "Самойлова", "Тимуровна", "Иван", "Петров"):
        assert word not in out.text, out.text
    assert "подтвердила исправление" in out.text


def test_names_are_masked_by_the_redactor(redactor: Redactor) -> None:
    text = "[09:28] 이윤서: 배포 실패\n[09:29] 김민준: 확인할게요\n이윤서님 감사합니다"
    (out,) = redactor.redact_texts([text])
    assert "이윤서" not in out.text and "김민준" not in out.text, out.text
    assert out.text.startswith("[09:28] <PERSON>: 배포 실패"), out.text
