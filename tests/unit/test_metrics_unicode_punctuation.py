"""Answers that end in full-width punctuation score like answers that end in ASCII punctuation."""

from vrag_rl.scoring.metrics import contains_match, exact_match, normalize_answer


def test_full_width_punctuation_is_dropped_like_ascii():
    assert normalize_answer("其中默认样式为 beta。") == "其中默认样式为 beta"
    assert normalize_answer("「初号」，42 pt；") == "初号42 pt"


def test_contains_and_exact_match_see_through_full_width_punctuation():
    assert contains_match("其中默认样式为 beta。", ["beta"]) == 1.0
    assert contains_match("The default style is beta.", ["beta"]) == 1.0
    assert exact_match("初号。", ["初号"]) == 1.0
    assert contains_match("其中默认样式为 betamax。", ["beta"]) == 0.0  # still whole tokens only


def test_every_currency_sign_is_dropped_like_the_dollar():
    assert normalize_answer("¥2,870,611") == normalize_answer("$2,870,611") == "2870611"
    assert contains_match("¥2,870,611", ["2,870,611"]) == 1.0
    assert contains_match("€ 12 million", ["12 million"]) == 1.0
    assert contains_match("¥2,870,6110", ["2,870,611"]) == 0.0  # still whole tokens only
