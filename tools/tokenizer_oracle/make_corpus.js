// Generates tests/data/tokenizer/corpus.jsonl (one JSON string per line), deterministically:
// hand-written samples per category plus seeded random combinations of fragments.
// Usage (from the repository root): node tools/tokenizer_oracle/make_corpus.js
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const outFile = path.join(root, 'tests', 'data', 'tokenizer', 'corpus.jsonl');

// Small seeded PRNG (mulberry32) so the corpus is identical on every run.
function makeRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = makeRandom(20261130);
const pick = (list) => list[Math.floor(random() * list.length)];
const randint = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

const prose = [
  'In the beginning God created the heaven and the earth.',
  'And the earth was without form, and void; and darkness was upon the face of the deep.',
  'The quick brown fox jumps over the lazy dog.',
  "It's a truth universally acknowledged, isn't it? We'll see; they've said they'd come.",
  'Dr. Smith arrived at 5:30 p.m. -- late, as usual -- and said: "Let\'s begin."',
  'She sells sea-shells by the sea-shore; the shells she sells are surely sea-shells.',
  'To be, or not to be, that is the question: Whether \'tis nobler in the mind to suffer...',
  'Mr. O\'Neil\'s dog (a three-year-old beagle) weighs 12.5 kg, roughly 27.6 lbs!',
  'Email me at john.doe+test@example.com or visit https://www.example.org/path?q=1&r=two#frag.',
  'The U.S.A. and the U.K. signed the treaty on Jan. 1st, 1999 at 09:00 GMT.',
  'Café, naïve, résumé, coöperate, façade, jalapeño, Zürich, São Paulo, Kraków.',
  'He said — quite loudly — “this is ‘fine’…” and left.',
  'ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!',
  'mixedCASE camelCase snake_case kebab-case PascalCase SCREAMING_SNAKE_CASE',
  'Thou shalt not kill. Thou shalt not commit adultery. Thou shalt not steal.',
  'And God said, Let there be light: and there was light.',
  'For God so loved the world, that he gave his only begotten Son.',
  'The LORD is my shepherd; I shall not want.',
  'Large language models predict the next token given all previous tokens.',
  'Tokenization splits text into pieces; byte-level BPE never needs an unknown token.',
  'What? No! Yes!! Really??? Okay...',
  'a b c d e f g h i j k l m n o p q r s t u v w x y z',
  'A',
  'I',
  'Hello',
  ' Hello',
  'Hello ',
  'hello world',
  'Hello, World!',
  'don\'t won\'t can\'t shouldn\'t I\'m you\'re he\'s we\'ve they\'ll I\'d',
  "DON'T WON'T CAN'T I'M YOU'RE",
  'Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis',
  'The price is $1,234.56 (or €1.234,56, or £999, or ¥100000).',
  '50% off! 3/4 cup; 2^10 = 1024; x² + y² = z²; ½ ¼ ¾',
  'Call +1 (555) 123-4567 or 555.987.6543 ext. 89.',
];

const code = [
  'def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n',
  'import numpy as np\n\nx = np.arange(10, dtype=np.float32)\nprint(x.mean(), x.std())\n',
  'class Foo:\n\tdef __init__(self, bar):\n\t\tself.bar = bar  # tabs for indentation\n',
  '#include <iostream>\n\nint main() {\n    std::cout << "Hello, world!" << std::endl;\n    return 0;\n}\n',
  'template <typename T>\nstd::vector<T> reversed(const std::vector<T>& v) { return {v.rbegin(), v.rend()}; }',
  'for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }',
  'const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\n',
  'function debounce(fn, ms) {\r\n  let t;\r\n  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };\r\n}\r\n',
  'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
  'impl<T: Clone> From<&[T]> for Stack<T> { fn from(s: &[T]) -> Self { Stack(s.to_vec()) } }',
  'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello")\n}\n',
  'SELECT u.id, COUNT(*) AS n FROM users u JOIN orders o ON o.user_id = u.id WHERE o.total > 100 GROUP BY u.id;',
  '{"name": "deepinfer", "version": "0.1.0", "tags": ["c++", "inference"], "nested": {"a": [1, 2.5, -3e10]}}',
  '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Test</title></head><body><p class="x">Hi</p></body></html>',
  '#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo "$f" | tr a-z A-Z; done\n',
  'main :: IO ()\nmain = mapM_ print [x * y | x <- [1..3], y <- [4..6]]\n',
  'x <- c(1, 2, 3); mean(x) %>% round(2)',
  'public static void main(String[] args) { System.out.println("Hi"); }',
  'let rec fact n = if n <= 1 then 1 else n * fact (n - 1);;',
  '    indented with four spaces\n        and eight\n            and twelve\n',
  'if (a && b || !c) { x >>= 2; y <<= 3; z ^= ~w; }',
  'regex = r"^(?P<user>[\\w.+-]+)@(?P<host>[\\w-]+\\.[\\w.]+)$"',
  'path = "C:\\\\Users\\\\name\\\\Documents\\\\file.txt"',
  '// TODO(someone): fix this\n/* multi\n   line */\n',
  '$ ./configure --prefix=/usr/local && make -j4 && sudo make install',
  'diff --git a/x.py b/x.py\n@@ -1,3 +1,4 @@\n-old line\n+new line\n',
  '```python\nprint("fenced")\n```',
  'key: value\nlist:\n  - item1\n  - item2\nmap: {a: 1, b: 2}\n',
  '[section]\nname = "value"\nnumbers = [1, 2, 3]\n',
  '\\begin{equation} E = mc^2 \\end{equation} $\\alpha + \\beta = \\gamma$',
];

const cjk = [
  '你好，世界！',
  '我爱北京天安门。',
  '人工智能正在改变世界，大型语言模型可以理解和生成文本。',
  '今天天气很好，我们去公园散步吧。',
  '深度求索发布了新的模型。',
  '《红楼梦》是中国古典小说的巅峰之作。',
  '这是一个测试：数字123和English混合。',
  'こんにちは、世界！',
  '日本語のテキストをトークン化します。',
  'カタカナとひらがなと漢字が混ざっています。',
  'ラーメンを食べたい。',
  '東京タワーは333メートルです。',
  '안녕하세요, 세계!',
  '한국어 문장을 토큰화합니다.',
  '서울특별시 강남구 테헤란로 123',
  '繁體中文：臺灣、香港、澳門。',
  '中文标点：“引号”、（括号）、【方括号】、《书名号》……',
  '全角文字：ＡＢＣ１２３！？',
  '𠀀𠀁𠀂 (CJK Extension B)',
  '漢字かな交じり文',
];

const otherScripts = [
  'مرحبا بالعالم',
  'اللغة العربية جميلة جداً.',
  'السلام عليكم ورحمة الله وبركاته',
  'العدد ١٢٣ والعدد 456',
  'שלום עולם',
  'नमस्ते दुनिया',
  'हिन्दी भाषा में लिखा गया वाक्य।',
  'สวัสดีชาวโลก',
  'Привет, мир! Как дела?',
  'Съешь же ещё этих мягких французских булок.',
  'Γειά σου Κόσμε! αβγδε ΑΒΓΔΕ',
  'Tiếng Việt có dấu: Xin chào thế giới.',
  'Türkçe: Iğdır, İstanbul, ılık, şeker.',
  'Ελληνικά και English μαζί',
  'ქართული ენა',
  'Հայերեն լեզու',
  'ትግርኛ አማርኛ',
  'Zalgo: Z̷̢a̶l̵g̸o̴ t̷e̸x̶t̵',
  'e\u0301 (combining acute) vs \u00e9 (precomposed)',
  'Ǆ ǅ ǆ ﬁ ﬂ ﬀ Å Ω',
];

const emoji = [
  '😀😃😄😁😆',
  'I love 🍕 and 🍺!',
  '👍🏽 thumbs up with skin tone',
  '👨‍👩‍👧‍👦 family',
  '👩🏻‍💻 woman technologist',
  '🏳️‍🌈 rainbow flag',
  '🇺🇸🇬🇧🇯🇵🇨🇳 flags',
  '❤️ heart with VS16, ❤ without',
  '1️⃣ 2️⃣ #️⃣ keycaps',
  '🧑‍🤝‍🧑 people holding hands',
  '🐈‍⬛ black cat',
  '🫠🫥🫶 newer emoji',
  'text😀text😀😀text',
  '🔥🔥🔥🔥🔥🔥🔥🔥🔥🔥',
  '☺ ☹ ☠ ✌ ✍ ⚡ ☕',
  '🎉 Congratulations! 🎊🎈',
  '👁‍🗨 eye in speech bubble',
  '😀 😃 😄',
];

const numbers = [
  '0', '7', '42', '123', '1234', '12345', '123456', '1234567', '12345678901234567890',
  '3.14159265358979323846264338327950288419716939937510',
  '1,000,000', '1_000_000', '0xDEADBEEF', '0b101010', '1e-10', '-273.15', '+42',
  '2026-11-30T19:06:32Z', '192.168.0.1', '4111 1111 1111 1111', 'v1.2.3-rc.4',
  'abc123def456', '123abc', 'a1b2c3d4e5', '第1章第23节', '１２３４５ fullwidth digits',
  '٠١٢٣٤٥٦٧٨٩ Arabic-Indic', '०१२३४५ Devanagari', '½⅓¼ vulgar fractions', 'Ⅻ roman numeral',
  '①②③ circled', '²³¹ superscripts', '99 bottles of beer on the wall, 99 bottles of beer.',
  '3141592653589793238462643383279502884197169399375105820974944592307816406286',
];

const whitespace = [
  '', ' ', '  ', '   ', '\t', '\t\t', '\n', '\n\n', '\r\n', '\r', '\r\n\r\n', ' \n ', '\n \n',
  'a  b', 'a   b', 'a\tb', 'a\t\tb', 'a\nb', 'a\r\nb', 'a\rb', 'a \n b', 'a\n\n\nb',
  '  leading spaces', 'trailing spaces  ', '\tleading tab', 'trailing tab\t',
  'line1\r\nline2\r\nline3\r\n', 'mixed \t \n \r\n whitespace', 'a\u00a0b non-breaking space',
  'a\u3000b ideographic space', 'a\u2003b em space', 'a\u200bb zero width space', 'a\u2028b line separator',
  'a\u0085b next line', 'a\u000bb vertical tab', 'a\u000cb form feed', '     \n     ', '\t \t \t',
  'word' + ' '.repeat(20) + 'word', 'x' + '\n'.repeat(10) + 'y', ' '.repeat(100),
];


const tokenizerFiles = [
  path.join(root, 'tests', 'data', 'tokenizers', 'deepseek-v3', 'tokenizer.json'),
  path.join(root, 'models', 'kjv-tiny-v4', 'tokenizer.json'),
];
// Every added token of both tokenizers (deduplicated, in file order).
const addedTokens = [];
for (const file of tokenizerFiles) {
  for (const token of JSON.parse(fs.readFileSync(file, 'utf8')).added_tokens) {
    if (!addedTokens.includes(token.content)) addedTokens.push(token.content);
  }
}

const lookAlikes = [
  '<|User|>', '<|Assistant|>', '<｜User', 'User｜>', '<｜Usr｜>', '<｜user｜>', '<｜User ｜>', '< ｜User｜>',
  '<｜User｜', '｜User｜>', '<<｜User｜>>', '<｜<｜User｜>', '<｜User｜>>', '<｜Assistant｜', '<｜Asistant｜>',
  '<think', 'think>', '</think', '<think >', '< think>', '<THINK>', '<Think>', '<thinking>', '</ think>',
  '<<think>>', '<think><think>', '</think></think>', '<think></think>', '<｜begin▁of▁sentence', 'begin▁of▁sentence｜>',
  '<｜begin of sentence｜>', '<｜begin_of_sentence｜>', '<|begin▁of▁sentence|>', '<｜end▁of▁sentence｜', '<｜end▁of▁sentenc｜>',
  '<｜place▁holder▁no▁800｜>', '<｜place▁holder▁no▁-1｜>', '<｜place▁holder▁no▁0001｜>', '<｜place▁holder▁no｜>',
  '<｜place▁holder▁no▁7', '<｜fim▁hole', '<｜fim hole｜>', '<｜tool▁sep', '<｜tool▁call▁begin｜', '<|EOT|', '<|EOT>', '<|eot|>',
  '<|EOT|>', '<|EOT|><|EOT|>', '<s>', '</s>', '<unk>', '<pad>', '<|endoftext|>', '<|im_start|>', '<｜▁pad▁｜>', '<｜pad｜>',
  '｜', '▁', '<｜', '｜>', '<', '>', '</', '/>', '<>', '<｜｜>',
];

const fragmentPool = [
  ...prose.slice(0, 20), ...code.slice(0, 10), ...cjk, ...otherScripts, ...emoji, ...numbers, ...lookAlikes,
  ' ', '  ', '\t', '\n', '\r\n', '\n\n', ' \n', '.', ',', '!', '?', '...', '--', '(', ')', '"', "'", '`',
  'the', ' the', 'The', ' and', ' of', 'ing', 'tion', "'s", "'ll", 'x', 'Z', '_', '__init__', '::', '->', '=>',
];

const corpus = [];
const add = (text) => corpus.push(text);

for (const list of [prose, code, cjk, otherScripts, emoji, numbers, whitespace, lookAlikes]) list.forEach(add);

// Every added token alone, inside text with and without spaces, and at both ends.
const specialPicks = addedTokens;
specialPicks.forEach((token, index) => {
  const variant = index % 4;
  if (variant === 0) add(token);
  else if (variant === 1) add(`Hello ${token} world`);
  else if (variant === 2) add(`text${token}text`);
  else add(`${token}\n${pick(prose)}${token}`);
});
// The chat-style tokens of both tokenizers in realistic layouts.
const chatTokens = addedTokens.filter((t) => !/place▁holder/.test(t));
for (const token of chatTokens) {
  add(`${token} leading space after`);
  add(`before ${token}`);
  add(`${token}${token}`);
  add(`  ${token}  `);
  add(`${pick(cjk)}${token}${pick(emoji)}`);
}
add('<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hi!<｜Assistant｜><think>\nThe user greets.\n</think>\n\nHello!<｜end▁of▁sentence｜>');
add('<｜User｜>What is 2+2?<｜Assistant｜><think>2+2=4</think>4<｜end▁of▁sentence｜><｜User｜>Thanks<｜Assistant｜>');
add('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>');
add('<｜fim▁begin｜>def add(a, b):\n    <｜fim▁hole｜>\n<｜fim▁end｜>');

// Every printable and control ASCII character alone and between letters; Latin-1 and a few others.
for (let c = 0; c < 128; ++c) {
  add(String.fromCharCode(c));
  add(`a${String.fromCharCode(c)}b`);
}
for (let c = 0xa0; c < 0x180; c += 3) add(`${String.fromCharCode(c)}x ${String.fromCharCode(c)}`);

// Whitespace runs of varied kinds and lengths around words and punctuation.
const spaceKinds = [' ', '\t', '\n', '\r\n', '\r', '\u00a0', '\u3000'];
for (let i = 0; i < 120; ++i) {
  let run = '';
  const len = randint(1, 8);
  for (let j = 0; j < len; ++j) run += pick(spaceKinds);
  add(`${pick(['word', 'x', '.', '123', '你好', '😀', '<think>', ''])}${run}${pick(['word', 'X', '!', '456', 'こんにちは', '👍', '</think>', ''])}`);
}

// Long numbers of every length 1..40 and digit groups mixed with letters.
for (let len = 1; len <= 40; ++len) {
  let digits = '';
  for (let j = 0; j < len; ++j) digits += String(randint(0, 9));
  add(digits);
  add(`v${digits}x ${digits}.${digits.slice(0, 3)}`);
}

// Random mixtures of fragments: the bulk of the corpus.
for (let i = 0; i < 900; ++i) {
  const parts = randint(2, 7);
  let text = '';
  for (let j = 0; j < parts; ++j) {
    const fragment = random() < 0.12 ? pick(addedTokens.slice(0, 3).concat(chatTokens)) : pick(fragmentPool);
    text += fragment;
    if (random() < 0.5) text += pick([' ', '', '\n', '  ', '\t']);
  }
  add(text);
}

// Longer documents: several paragraphs of mixed content.
for (let i = 0; i < 40; ++i) {
  const paragraphs = [];
  for (let j = 0; j < randint(3, 8); ++j) paragraphs.push(pick([...prose, ...code, ...cjk, ...otherScripts, ...emoji]));
  add(paragraphs.join(pick(['\n\n', '\n', ' ', '\r\n\r\n'])));
}

// Long runs (a few KB): whitespace lookaheads over long runs, long BPE words, long numbers.
for (const [unit, count] of [[' ', 3000], ['a', 3000], ['ab', 1500], ['\n', 2000], [' \t', 1000], ['9', 3001],
  ['你', 1000], ['😀', 500], ['.', 2500], ['\r\n', 1000], ['x ', 1500], ['<think>', 300]]) {
  add(unit.repeat(count));
  add(`start ${unit.repeat(count)} end`);
}

// Probes for added-token flags (used by the added_flags variant, harmless elsewhere): word
// boundaries for single_word, whitespace around lstrip/rstrip tokens, overlapping contents.
const flagProbes = [
  'hello', 'hello world', 'say hello', 'say hello!', 'helloing', 'ahello', 'hello2', 'hello_x', 'héllo hello',
  'world', ' world', '   world', '\tworld', 'hello   world   ', 'the', 'the end', 'theory', 'other', 'bathe', 'the\n\nnext',
  'the  \t  next', '数字', ' 数字 ', 'a  数字  b', '数字数字', '  <think>  reasoning  </think>  answer',
  '<｜User｜>x marks', '<｜User｜>y', '  <｜User｜>  hi', 'singing ringing thing', 'ing', 'ING', 'hello<think>hello',
  'hellothe', 'the hello the', 'x</think>   \n\ny', '\u00a0<think>\u00a0', '\u3000<｜User｜>\u3000', 'héllo',
];
flagProbes.forEach(add);

const lines = corpus.map((text) => JSON.stringify(text));
fs.mkdirSync(path.dirname(outFile), { recursive: true });
fs.writeFileSync(outFile, lines.join('\n') + '\n');
console.log(`${corpus.length} strings -> ${path.relative(root, outFile)}`);
