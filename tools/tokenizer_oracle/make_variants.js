// Writes small tokenizer.json variants of models/kjv-tiny-v4 that exercise options the two real
// tokenizers do not use (ByteLevel add_prefix_space/use_regex, every Split behaviour, invert,
// "a b" merges, added-token lstrip/rstrip/single_word/normalized, no decoder), so the oracle can
// pin their semantics too. Output: tests/data/tokenizer/variants/<name>.json
// Usage (from the repository root): node tools/tokenizer_oracle/make_variants.js
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const base = JSON.parse(fs.readFileSync(path.join(root, 'models', 'kjv-tiny-v4', 'tokenizer.json'), 'utf8'));
const outDir = path.join(root, 'tests', 'data', 'tokenizer', 'variants');

const clone = (value) => JSON.parse(JSON.stringify(value));
const byteLevel = (addPrefixSpace, useRegex) => ({ type: 'ByteLevel', add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: useRegex });
const split = (pattern, behavior, invert) => ({ type: 'Split', pattern, behavior, invert });

const variants = {
  // GPT-2 style: ByteLevel does the splitting (its own regex) and adds a prefix space; merges as "a b".
  gpt2_style: (t) => {
    t.pre_tokenizer = byteLevel(true, true);
    t.model.merges = t.model.merges.map(([a, b]) => `${a} ${b}`);
  },
  // Every delimiter behaviour in one chain, with a literal (String) pattern and a prefix space.
  split_behaviors: (t) => {
    t.pre_tokenizer = {
      type: 'Sequence',
      pretokenizers: [
        split({ Regex: '\\p{N}' }, 'MergedWithPrevious', false),
        split({ String: ' ' }, 'MergedWithNext', false),
        split({ Regex: '[,;]' }, 'Removed', false),
        split({ Regex: '\\p{P}' }, 'Contiguous', false),
        byteLevel(true, false),
      ],
    };
  },
  // invert = true with two behaviours, and no decoder (HF then joins token strings with spaces).
  split_invert: (t) => {
    t.pre_tokenizer = {
      type: 'Sequence',
      pretokenizers: [
        split({ Regex: '\\p{L}+' }, 'MergedWithNext', true),
        split({ Regex: '\\s' }, 'Isolated', true),
        byteLevel(false, false),
      ],
    };
    t.decoder = null;
  },
  // Added tokens with strip / single-word / normalized flags, including one that overlaps a
  // non-normalized token (which must win: it is matched first, on the raw text).
  added_flags: (t) => {
    const byContent = Object.fromEntries(t.added_tokens.map((token) => [token.content, token]));
    Object.assign(byContent['<think>'], { lstrip: true, rstrip: true });
    Object.assign(byContent['</think>'], { rstrip: true });
    Object.assign(byContent['<｜User｜>'], { lstrip: true });
    const extra = (id, content, flags) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: true, special: false, ...flags });
    t.added_tokens.push(
      extra(4096, 'hello', { single_word: true }),
      extra(4097, 'world', { lstrip: true }),
      extra(4098, '<｜User｜>x', {}),
      extra(4099, 'ing', { normalized: false }),
      extra(4100, 'the', { rstrip: true, single_word: true, special: true }),
      extra(4101, '数字', { lstrip: true, rstrip: true, normalized: false, special: true }),
    );
  },
};

fs.mkdirSync(outDir, { recursive: true });
for (const [name, edit] of Object.entries(variants)) {
  const tokenizer = clone(base);
  edit(tokenizer);
  fs.writeFileSync(path.join(outDir, `${name}.json`), JSON.stringify(tokenizer));
  console.log(`variant ${name} -> ${path.relative(root, path.join(outDir, `${name}.json`))}`);
}
