// Template source -> syntax tree: splits text from {{ }}, {% %} and {# #} tags (applying Jinja's
// whitespace rules), tokenizes tag contents and parses them with Jinja's operator precedence.
#include <cctype>

#include "core/error.h"
#include "encoding/jinja/ast.h"
#include "encoding/jinja/template.h"

namespace deepinfer::jinja {

namespace {

constexpr int kMaxNesting = 200;  // bounds recursion on hostile templates

enum class SegmentKind { kText, kVariable, kBlock, kComment };

struct Segment {
  SegmentKind kind;
  std::string content;
  int line;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int line_at(std::string_view source, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) line += source[i] == '\n';
  return line;
}

// Splits the source into text and tags, applying -, trim_blocks and lstrip_blocks.
std::vector<Segment> split_segments(std::string_view src, const TemplateOptions& options) {
  std::vector<Segment> segments;
  bool strip_next_text = false;  // previous tag ended with '-'
  bool trim_next_newline = false;  // previous tag was a block/comment (trim_blocks)
  size_t pos = 0;
  auto push_text = [&](std::string text) {
    if (strip_next_text) {
      size_t i = 0;
      while (i < text.size() && is_space(text[i])) ++i;
      text.erase(0, i);
    } else if (trim_next_newline && !text.empty()) {
      if (text[0] == '\n') text.erase(0, 1);
      else if (text.size() > 1 && text[0] == '\r' && text[1] == '\n') text.erase(0, 2);
    }
    strip_next_text = false;
    trim_next_newline = false;
    segments.push_back({SegmentKind::kText, std::move(text), 0});
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string_view::npos || open + 1 >= src.size()) {
      push_text(std::string(src.substr(pos)));
      break;
    }
    std::string text(src.substr(pos, open - pos));
    char type = src[open + 1];
    SegmentKind kind = type == '{' ? SegmentKind::kVariable : type == '%' ? SegmentKind::kBlock : SegmentKind::kComment;
    size_t inner = open + 2;
    bool strip_before = inner < src.size() && src[inner] == '-';
    bool keep_before = inner < src.size() && src[inner] == '+';
    if (strip_before || keep_before) ++inner;
    // Find the closing delimiter, skipping string literals inside expressions.
    std::string closer = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    size_t close = std::string_view::npos;
    if (kind == SegmentKind::kComment) {
      close = src.find(closer, inner);
    } else {
      char quote = 0;
      for (size_t i = inner; i + 1 < src.size(); ++i) {
        char c = src[i];
        if (quote) {
          if (c == '\\') ++i;
          else if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == closer[0] && src[i + 1] == closer[1]) {
          close = i;
          break;
        }
      }
    }
    DEEPINFER_CHECK(close != std::string_view::npos, "template syntax error (line {}): unclosed tag",
                    line_at(src, open));
    size_t content_end = close;
    bool strip_after = content_end > inner && src[content_end - 1] == '-';
    if (strip_after) --content_end;
    // Whitespace before the tag.
    if (strip_before) {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (options.lstrip_blocks && kind != SegmentKind::kVariable && !keep_before) {
      // Jinja strips spaces/tabs before a block tag only when the tag starts its line.
      size_t line_start = text.rfind('\n');
      line_start = line_start == std::string::npos ? 0 : line_start + 1;
      bool at_line_start = line_start > 0 || pos == 0;
      bool only_blanks = text.find_first_not_of(" \t", line_start) == std::string::npos;
      if (at_line_start && only_blanks) text.resize(line_start);
    }
    push_text(std::move(text));
    if (kind != SegmentKind::kComment)
      segments.push_back({kind, std::string(src.substr(inner, content_end - inner)), line_at(src, open)});
    strip_next_text = strip_after;
    trim_next_newline = !strip_after && options.trim_blocks && kind != SegmentKind::kVariable;
    pos = close + 2;
    if (pos >= src.size()) {
      push_text("");
      break;
    }
  }
  return segments;
}

// ---------------------------------------------------------------------------------------------
// Expression tokens
// ---------------------------------------------------------------------------------------------

enum class TokenKind { kName, kString, kInteger, kFloat, kOperator, kEnd };

struct Token {
  TokenKind kind;
  std::string text;
  Value value;
};

std::vector<Token> tokenize(const std::string& src, int line) {
  std::vector<Token> tokens;
  size_t i = 0;
  static const char* kOperators[] = {"==", "!=", "<=", ">=", "//", "**", "<", ">", "+", "-", "*", "/", "%",
                                     "~",  "|",  ".",  ",",  ":",  "(", ")", "[", "]", "{", "}", "="};
  while (i < src.size()) {
    char c = src[i];
    if (is_space(c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i;
      while (i < src.size() && (std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_')) ++i;
      tokens.push_back({TokenKind::kName, src.substr(start, i - start), {}});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = i;
      while (i < src.size() && (std::isdigit(static_cast<unsigned char>(src[i])) || src[i] == '_')) ++i;
      bool is_float = false;
      if (i + 1 < src.size() && src[i] == '.' && std::isdigit(static_cast<unsigned char>(src[i + 1]))) {
        is_float = true;
        ++i;
        while (i < src.size() && std::isdigit(static_cast<unsigned char>(src[i]))) ++i;
      }
      if (i < src.size() && (src[i] == 'e' || src[i] == 'E')) {
        size_t j = i + 1;
        if (j < src.size() && (src[j] == '+' || src[j] == '-')) ++j;
        if (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) {
          is_float = true;
          i = j;
          while (i < src.size() && std::isdigit(static_cast<unsigned char>(src[i]))) ++i;
        }
      }
      std::string digits;
      for (char d : src.substr(start, i - start))
        if (d != '_') digits += d;
      try {
        tokens.push_back(is_float ? Token{TokenKind::kFloat, digits, Value::floating(std::stod(digits))}
                                  : Token{TokenKind::kInteger, digits, Value::integer(std::stoll(digits))});
      } catch (const std::exception&) {
        fail("template syntax error (line {}): bad number '{}'", line, digits);
      }
    } else if (c == '\'' || c == '"') {
      std::string text;
      ++i;
      bool closed = false;
      while (i < src.size()) {
        char d = src[i++];
        if (d == c) {
          closed = true;
          break;
        }
        if (d == '\\' && i < src.size()) {
          char e = src[i++];
          switch (e) {
            case 'n': text += '\n'; break;
            case 't': text += '\t'; break;
            case 'r': text += '\r'; break;
            case '\\': text += '\\'; break;
            case '\'': text += '\''; break;
            case '"': text += '"'; break;
            default: text += '\\'; text += e; break;
          }
        } else {
          text += d;
        }
      }
      DEEPINFER_CHECK(closed, "template syntax error (line {}): unterminated string", line);
      tokens.push_back({TokenKind::kString, text, Value::string(text)});
    } else {
      bool matched = false;
      for (const char* op : kOperators) {
        size_t len = std::char_traits<char>::length(op);
        if (src.compare(i, len, op) == 0) {
          tokens.push_back({TokenKind::kOperator, op, {}});
          i += len;
          matched = true;
          break;
        }
      }
      DEEPINFER_CHECK(matched, "template syntax error (line {}): unexpected character '{}'", line, c);
    }
  }
  tokens.push_back({TokenKind::kEnd, "", {}});
  return tokens;
}

// ---------------------------------------------------------------------------------------------
// Expression parser (Jinja precedence)
// ---------------------------------------------------------------------------------------------

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : tokens_(std::move(tokens)), line_(line) {}

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool at_end() const { return peek().kind == TokenKind::kEnd; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  Token next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  void expect_op(const char* op) {
    DEEPINFER_CHECK(is_op(op), "template syntax error (line {}): expected '{}' but found '{}'", line_, op,
                    peek().text);
    ++pos_;
  }
  std::string expect_name() {
    DEEPINFER_CHECK(peek().kind == TokenKind::kName, "template syntax error (line {}): expected a name, found '{}'",
                    line_, peek().text);
    return next().text;
  }
  void expect_end() {
    DEEPINFER_CHECK(at_end(), "template syntax error (line {}): unexpected '{}'", line_, peek().text);
  }

  ExprPtr parse_expression() {
    Depth guard(this);
    ExprPtr value = parse_or();
    while (is_name("if")) {
      ++pos_;
      auto node = make(Expr::Kind::kCondition);
      node->children.push_back(std::move(value));
      node->children.push_back(parse_or());
      if (is_name("else")) {
        ++pos_;
        node->children.push_back(parse_expression());
      } else {
        node->children.push_back(nullptr);
      }
      value = std::move(node);
    }
    return value;
  }

  // A "for" target or a plain name list: a, b
  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) ++pos_;
    names.push_back(expect_name());
    while (is_op(",")) {
      ++pos_;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  // Parses an expression without a trailing conditional (used for "for x in y if z").
  ExprPtr parse_or_expression() { return parse_or(); }

 private:
  struct Depth {
    explicit Depth(ExprParser* p) : parser(p) {
      DEEPINFER_CHECK(++parser->depth_ < kMaxNesting, "template syntax error (line {}): expression nested too deeply",
                      parser->line_);
    }
    ~Depth() { --parser->depth_; }
    ExprParser* parser;
  };

  ExprPtr make(Expr::Kind kind) {
    auto node = std::make_unique<Expr>();
    node->kind = kind;
    node->line = line_;
    return node;
  }
  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right) {
    auto node = make(Expr::Kind::kBinary);
    node->name = std::move(op);
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      ++pos_;
      left = binary("or", std::move(left), parse_and());
    }
    return left;
  }
  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      ++pos_;
      left = binary("and", std::move(left), parse_not());
    }
    return left;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Depth guard(this);
      ++pos_;
      auto node = make(Expr::Kind::kUnary);
      node->name = "not";
      node->children.push_back(parse_not());
      return node;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    static const char* kCompare[] = {"==", "!=", "<", ">", "<=", ">="};
    while (true) {
      std::string op;
      for (const char* c : kCompare)
        if (is_op(c)) op = c;
      if (!op.empty()) {
        ++pos_;
      } else if (is_name("in")) {
        ++pos_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        op = "not in";
      } else {
        return left;
      }
      left = binary(op, std::move(left), parse_math1());
    }
  }
  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }
  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      ++pos_;
      left = binary("~", std::move(left), parse_math2());
    }
    return left;
  }
  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }
  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      ++pos_;
      left = binary("**", std::move(left), parse_unary(true));
    }
    return left;
  }
  ExprPtr parse_unary(bool with_filter) {
    Depth guard(this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto unary = make(Expr::Kind::kUnary);
      unary->name = next().text;
      unary->children.push_back(parse_unary(false));
      node = std::move(unary);
    } else {
      node = parse_postfix(parse_primary());
    }
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }
  ExprPtr parse_primary() {
    Depth guard(this);
    const Token& token = peek();
    if (token.kind == TokenKind::kName) {
      std::string name = next().text;
      if (name == "true" || name == "True") return literal(Value::boolean(true));
      if (name == "false" || name == "False") return literal(Value::boolean(false));
      if (name == "none" || name == "None") return literal(Value::none());
      auto node = make(Expr::Kind::kName);
      node->name = name;
      return node;
    }
    if (token.kind == TokenKind::kString) {
      std::string text;
      while (peek().kind == TokenKind::kString) text += next().text;  // adjacent literals concatenate
      return literal(Value::string(text));
    }
    if (token.kind == TokenKind::kInteger || token.kind == TokenKind::kFloat) return literal(next().value);
    if (is_op("(")) {
      ++pos_;
      if (is_op(")")) {
        ++pos_;
        auto empty = make(Expr::Kind::kList);
        empty->name = "tuple";
        return empty;
      }
      ExprPtr inner = parse_expression();
      if (is_op(",")) {  // tuple: behaves as a list here
        auto list = make(Expr::Kind::kList);
        list->name = "tuple";
        list->children.push_back(std::move(inner));
        while (is_op(",")) {
          ++pos_;
          if (is_op(")")) break;
          list->children.push_back(parse_expression());
        }
        inner = std::move(list);
      }
      expect_op(")");
      return inner;
    }
    if (is_op("[")) {
      ++pos_;
      auto list = make(Expr::Kind::kList);
      while (!is_op("]")) {
        list->children.push_back(parse_expression());
        if (!is_op(",")) break;
        ++pos_;
      }
      expect_op("]");
      return list;
    }
    if (is_op("{")) {
      ++pos_;
      auto dict = make(Expr::Kind::kDict);
      while (!is_op("}")) {
        dict->children.push_back(parse_expression());
        expect_op(":");
        dict->children.push_back(parse_expression());
        if (!is_op(",")) break;
        ++pos_;
      }
      expect_op("}");
      return dict;
    }
    fail("template syntax error (line {}): unexpected '{}'", line_, token.text.empty() ? "end of tag" : token.text);
  }
  ExprPtr literal(Value value) {
    auto node = make(Expr::Kind::kLiteral);
    node->value = std::move(value);
    return node;
  }
  void parse_call_args(Expr& node) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string key = next().text;
        ++pos_;
        node.kwargs.emplace_back(key, parse_expression());
      } else {
        node.children.push_back(parse_expression());
      }
      if (!is_op(",")) break;
      ++pos_;
    }
    expect_op(")");
  }
  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        ++pos_;
        auto attr = make(Expr::Kind::kAttribute);
        if (peek().kind == TokenKind::kInteger) {  // foo.0 is foo[0]
          attr->kind = Expr::Kind::kItem;
          attr->children.push_back(std::move(node));
          attr->children.push_back(literal(next().value));
        } else {
          attr->name = expect_name();
          attr->children.push_back(std::move(node));
        }
        node = std::move(attr);
      } else if (is_op("[")) {
        ++pos_;
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        auto call = make(Expr::Kind::kCall);
        call->children.push_back(std::move(node));
        parse_call_args(*call);
        node = std::move(call);
      } else {
        return node;
      }
    }
  }
  ExprPtr parse_subscript(ExprPtr target) {
    ExprPtr parts[3];
    bool is_slice = false;
    int part = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        ++pos_;
        is_slice = true;
        DEEPINFER_CHECK(++part < 3, "template syntax error (line {}): bad slice", line_);
        continue;
      }
      DEEPINFER_CHECK(!parts[part], "template syntax error (line {}): bad subscript", line_);
      parts[part] = parse_expression();
    }
    expect_op("]");
    auto node = make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kItem);
    node->children.push_back(std::move(target));
    if (is_slice) {
      for (auto& p : parts) node->children.push_back(std::move(p));
    } else {
      DEEPINFER_CHECK(parts[0] != nullptr, "template syntax error (line {}): empty subscript", line_);
      node->children.push_back(std::move(parts[0]));
    }
    return node;
  }
  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        ++pos_;
        auto filter = make(Expr::Kind::kFilter);
        filter->name = expect_name();
        while (is_op(".")) {  // dotted filter names
          ++pos_;
          filter->name += "." + expect_name();
        }
        filter->children.push_back(std::move(node));
        if (is_op("(")) parse_call_args(*filter);
        node = std::move(filter);
      } else if (is_name("is")) {
        ++pos_;
        auto test = make(Expr::Kind::kTest);
        if (is_name("not")) {
          ++pos_;
          test->negated = true;
        }
        test->name = expect_name();
        test->children.push_back(std::move(node));
        if (is_op("(")) {
          parse_call_args(*test);
        } else {
          const Token& t = peek();
          bool starts_arg = t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
                            t.kind == TokenKind::kFloat || is_op("[") || is_op("{") ||
                            (t.kind == TokenKind::kName && t.text != "else" && t.text != "or" &&
                             t.text != "and" && t.text != "if" && t.text != "in" && t.text != "is" && t.text != "not");
          if (starts_arg) test->children.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(test);
      } else if (is_op("(")) {
        auto call = make(Expr::Kind::kCall);
        call->children.push_back(std::move(node));
        parse_call_args(*call);
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int line_;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Statement parser
// ---------------------------------------------------------------------------------------------

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segments) : segments_(std::move(segments)) {}

  NodeList parse_all() {
    NodeList nodes = parse_until({});
    if (pos_ < segments_.size())
      fail("template syntax error (line {}): unexpected '{}'", segments_[pos_].line, first_word(segments_[pos_]));
    return nodes;
  }

 private:
  static std::string first_word(const Segment& segment) {
    size_t i = 0;
    while (i < segment.content.size() && is_space(segment.content[i])) ++i;
    size_t start = i;
    while (i < segment.content.size() && (std::isalnum(static_cast<unsigned char>(segment.content[i])) ||
                                          segment.content[i] == '_'))
      ++i;
    return segment.content.substr(start, i - start);
  }

  // Parses nodes until a block tag whose first word is in `stops` (left unconsumed).
  NodeList parse_until(const std::vector<std::string>& stops) {
    DEEPINFER_CHECK(++depth_ < kMaxNesting, "template syntax error: blocks nested too deeply");
    NodeList nodes;
    while (pos_ < segments_.size()) {
      const Segment& segment = segments_[pos_];
      if (segment.kind == SegmentKind::kText) {
        if (!segment.content.empty()) {
          auto node = std::make_unique<Node>();
          node->kind = Node::Kind::kText;
          node->text = segment.content;
          nodes.push_back(std::move(node));
        }
        ++pos_;
        continue;
      }
      if (segment.kind == SegmentKind::kVariable) {
        ExprParser parser(tokenize(segment.content, segment.line), segment.line);
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::kOutput;
        node->line = segment.line;
        node->expr = parser.parse_expression();
        parser.expect_end();
        nodes.push_back(std::move(node));
        ++pos_;
        continue;
      }
      std::string word = first_word(segment);
      for (const auto& stop : stops)
        if (word == stop) {
          --depth_;
          return nodes;
        }
      nodes.push_back(parse_statement(word));
    }
    DEEPINFER_CHECK(stops.empty(), "template syntax error: missing {{% {} %}}", stops.empty() ? "" : stops.back());
    --depth_;
    return nodes;
  }

  NodePtr parse_statement(const std::string& word) {
    const Segment& segment = segments_[pos_];
    int line = segment.line;
    ExprParser parser(tokenize(segment.content, line), line);
    parser.next();  // the keyword
    ++pos_;
    auto node = std::make_unique<Node>();
    node->line = line;
    if (word == "if") {
      node->kind = Node::Kind::kIf;
      ExprPtr condition = parser.parse_expression();
      parser.expect_end();
      while (true) {
        NodeList body = parse_until({"elif", "else", "endif"});
        node->branches.emplace_back(std::move(condition), std::move(body));
        DEEPINFER_CHECK(pos_ < segments_.size(), "template syntax error (line {}): missing endif", line);
        std::string next = first_word(segments_[pos_]);
        ExprParser tag(tokenize(segments_[pos_].content, segments_[pos_].line), segments_[pos_].line);
        tag.next();
        ++pos_;
        if (next == "endif") {
          tag.expect_end();
          break;
        }
        if (next == "else") {
          tag.expect_end();
          NodeList else_body = parse_until({"endif"});
          node->branches.emplace_back(nullptr, std::move(else_body));
          DEEPINFER_CHECK(pos_ < segments_.size(), "template syntax error (line {}): missing endif", line);
          ++pos_;
          break;
        }
        condition = tag.parse_expression();  // elif
        tag.expect_end();
      }
    } else if (word == "for") {
      node->kind = Node::Kind::kFor;
      node->targets = parser.parse_targets();
      DEEPINFER_CHECK(parser.is_name("in"), "template syntax error (line {}): expected 'in' in for", line);
      parser.next();
      node->expr = parser.parse_or_expression();
      if (parser.is_name("if")) {
        parser.next();
        node->loop_filter = parser.parse_or_expression();
      }
      if (parser.is_name("recursive")) fail("template error (line {}): recursive loops are not supported", line);
      parser.expect_end();
      node->body = parse_until({"else", "endfor"});
      DEEPINFER_CHECK(pos_ < segments_.size(), "template syntax error (line {}): missing endfor", line);
      if (first_word(segments_[pos_]) == "else") {
        ++pos_;
        node->else_body = parse_until({"endfor"});
        DEEPINFER_CHECK(pos_ < segments_.size(), "template syntax error (line {}): missing endfor", line);
      }
      ++pos_;
    } else if (word == "set") {
      std::string name = parser.expect_name();
      std::string attribute;
      if (parser.is_op(".")) {
        parser.next();
        attribute = parser.expect_name();
      }
      node->targets.push_back(name);
      while (attribute.empty() && parser.is_op(",")) {
        parser.next();
        node->targets.push_back(parser.expect_name());
      }
      node->attribute = attribute;
      if (parser.is_op("=")) {
        parser.next();
        node->kind = Node::Kind::kSet;
        node->expr = parser.parse_expression();
        parser.expect_end();
      } else {
        parser.expect_end();
        node->kind = Node::Kind::kSetBlock;
        node->body = parse_until({"endset"});
        DEEPINFER_CHECK(pos_ < segments_.size(), "template syntax error (line {}): missing endset", line);
        ++pos_;
      }
    } else if (word == "break" || word == "continue") {
      parser.expect_end();
      node->kind = word == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
    } else {
      fail("template syntax error (line {}): unsupported tag '{}'", line, word);
    }
    return node;
  }

  std::vector<Segment> segments_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

Template Template::parse(std::string_view source, TemplateOptions options) {
  Template result;
  TemplateParser parser(split_segments(source, options));
  result.body_ = parser.parse_all();
  return result;
}

}  // namespace deepinfer::jinja
