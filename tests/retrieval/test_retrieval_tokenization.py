from __future__ import annotations

from rag_lab.retrieval.tokenization import DEFAULT_TOKENIZER, ENGLISH_STOPWORDS, Tokenizer, tokenize


def test_latin_lowercase_stopwords_and_separators():
    assert tokenize("The Quick-Brown fox, and THE lazy_dog's 42 bones!") == [
        "quick",
        "brown",
        "fox",
        "lazy",
        "dog",
        "s",
        "42",
        "bones",
    ]
    assert tokenize("") == [] and tokenize("  the  of  ") == []
    assert "the" in ENGLISH_STOPWORDS


def test_accented_latin_is_one_word():
    assert tokenize("Café naïve Über") == ["café", "naïve", "über"]


def test_chinese_uses_jieba_cut_for_search():
    toks = tokenize("北京大学的机器学习课程。")
    # cut_for_search yields the sub-words and the whole word; punctuation is dropped
    assert toks == ["北京", "大学", "北京大学", "的", "机器", "学习", "课程"]


def test_mixed_scripts_keep_order():
    assert tokenize("GPT模型 in 北京") == ["gpt", "模型", "北京"]


def test_identity_names_rules_and_jieba_version():
    ident = DEFAULT_TOKENIZER.identity
    assert ident.startswith("rag_lab.tokenize/v1") and "jieba-0.42.1" in ident
    custom = Tokenizer(stopwords=["fox"])
    assert custom.identity != ident
    assert custom("the fox") == ["the"]
