"""BERT's WordPiece tokenization, as Hugging Face's tokenizer.json runs it (BertNormalizer,
BertPreTokenizer, WordPiece), so that a model trained here in Python reads exactly the ids
Ferry's tokenizer (@huggingface/tokenizers) gives the same text at serving time.

    from wordpiece import WordPiece
    tok = WordPiece.load("models/build/wordpiece/tokenizer.json")
    tok.encode("Hello, world!")            # [CLS] hello , world ! [SEP]
    tok.encode("Hello", special=False)     # the word alone

Rules follow @huggingface/tokenizers 0.2.0 where it differs from the Rust library (its control
character test, CJK ideographs one UTF-16 unit at a time).
"""

import json
import unicodedata

# BertPreTokenizer's punctuation: Unicode's P* categories and every ASCII symbol
ASCII_PUNCT = set(chr(c) for c in [*range(0x21, 0x30), *range(0x3A, 0x41), *range(0x5B, 0x61), *range(0x7B, 0x7F)])


def is_punctuation(ch):
    return ch in ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def normalize(text, lowercase=True):
    """BertNormalizer with clean_text, handle_chinese_chars, lowercase and accents stripped."""
    out = []
    for ch in text:
        cp = ord(ch)
        if ch in "\t\n\r":
            out.append(" ")
        elif cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs"):
            continue
        elif ch.isspace():
            out.append(" ")
        # an astral ideograph is two UTF-16 units in JavaScript, neither of them CJK there
        elif cp <= 0xFFFF and is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    text = "".join(out)
    if lowercase:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    return text


def pre_tokenize(text):
    """BertPreTokenizer: runs of non-space non-punctuation, and each punctuation mark alone."""
    words, word = [], []
    for ch in text.strip():
        if ch.isspace():
            if word:
                words.append("".join(word))
                word = []
        elif is_punctuation(ch):
            if word:
                words.append("".join(word))
                word = []
            words.append(ch)
        else:
            word.append(ch)
    if word:
        words.append("".join(word))
    return words


class WordPiece:
    def __init__(self, vocab, unk="[UNK]", prefix="##", max_chars=100, cls="[CLS]", sep="[SEP]"):
        self.vocab = vocab
        self.unk, self.prefix, self.max_chars = unk, prefix, max_chars
        self.cls, self.sep = cls, sep

    @staticmethod
    def load(path):
        with open(path, encoding="utf-8") as f:
            model = json.load(f)["model"]
        return WordPiece(model["vocab"], model["unk_token"], model["continuing_subword_prefix"], model["max_input_chars_per_word"])

    def word_pieces(self, word):
        """Greedy longest match first; a word with any part not in the vocabulary is [UNK]."""
        if len(word) > self.max_chars:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return [self.unk]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text):
        return [p for w in pre_tokenize(normalize(text)) for p in self.word_pieces(w)]

    def encode(self, text, special=True):
        tokens = self.tokenize(text)
        if special:
            tokens = [self.cls, *tokens, self.sep]
        return [self.vocab[t] for t in tokens]
