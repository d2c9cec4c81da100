"""Script detection for the language-aware default embedder: units counted by hand."""

from __future__ import annotations

from momoka.text.scripts import MIN_UNITS, dominant_scripts, is_mostly_non_latin, non_latin_share, script_counts


def test_units_per_script():
    # words of spaced scripts, characters of spaceless ones; digits and punctuation not counted
    assert script_counts("The Great Wall 长城 is 21,196 km long.") == {"Latin": 6, "Han": 2}  # The Great Wall is km long
    assert script_counts("Москва — столица России.") == {"Cyrillic": 3}
    assert script_counts("東京は日本の首都です。") == {"Han": 6, "Kana": 4}  # 東京日本首都 / はのです, a unit per character
    assert script_counts("서울은 한국의 수도") == {"Hangul": 3}
    assert script_counts("القاهرة عاصمة مصر") == {"Arabic": 3}
    assert script_counts("Ελληνικά και English") == {"Latin": 1, "Greek": 2}
    assert script_counts("नई दिल्ली") == {"Devanagari": 2}
    assert script_counts("กรุงเทพ") == {"Thai": 7}
    assert script_counts("ሰላም") == {"Other": 1}  # Ethiopic: a word of a script not listed
    assert script_counts("Ｆｕｌｌｗｉｄｔｈ café naïve Łódź") == {"Latin": 4}
    assert script_counts("123 + 456 = 579 !") == {}


def test_share_and_rule():
    assert non_latin_share([]) == 0.0
    # 3 Cyrillic words against 4 Latin words
    assert abs(non_latin_share(["Москва — столица России.", "Moscow is the capital."]) - 3 / 7) < 1e-12
    zh = "长城是中国古代的军事防御工程。"  # 14 Han characters
    assert is_mostly_non_latin([zh, zh])
    assert dominant_scripts([zh, "東京はです"]) == ["Han", "Kana"]
    # too small a sample is not judged
    assert not is_mostly_non_latin(["长城"]) and len("长城") < MIN_UNITS
    # half and half is not "mostly"
    en = " ".join(["word"] * 28)
    assert not is_mostly_non_latin([zh + zh, en])  # 28 Han, 28 Latin
    assert is_mostly_non_latin([zh + zh + "长", en])
    # Latin-script languages other than English are Latin: the rule cannot tell them apart
    assert not is_mostly_non_latin(["Les Normands ont donné leur nom à la Normandie au dixième siècle, "
                                    "et la région garde ce nom depuis mille ans."])
