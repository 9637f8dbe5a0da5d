"""Unicode ranges of the scripts written without spaces between words, as regex class
bodies: one definition for every reader of Chinese, Japanese and Korean text."""

from __future__ import annotations

KANA = "\u3040-\u30ff"
HAN = "\u3400-\u4dbf\u4e00-\u9fff"
HANGUL = "\uac00-\ud7a3"
# Chinese, Japanese and Korean letters: text that stands right beside a Latin value or a
# number without a space ("电话号码是+8610...", "としてj.ito@gmail.comを").
CJK = KANA + HAN + HANGUL
