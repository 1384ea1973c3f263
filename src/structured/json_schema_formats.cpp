// `format` keywords as exact regular grammars over the string's characters.
#include <fmt/format.h>

#include <map>

#include "structured/json_schema_internal.h"
#include "structured/regex.h"
#include "structured/unicode.h"

namespace deepinfer::structured::json_internal {
namespace {

const std::string kDecOctet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const std::string kIpv4 = kDecOctet + "(\\." + kDecOctet + "){3}";
const std::string kH16 = "[0-9a-fA-F]{1,4}";

std::string ipv6_regex() {
  const std::string h = kH16, ls32 = "(" + h + ":" + h + "|" + kIpv4 + ")";
  auto prefix = [&](int max_groups) { return "((" + h + ":){0," + std::to_string(max_groups) + "}" + h + ")?"; };
  std::vector<std::string> forms = {
      "(" + h + ":){6}" + ls32,
      "::(" + h + ":){5}" + ls32,
      "(" + h + ")?::(" + h + ":){4}" + ls32,
      prefix(1) + "::(" + h + ":){3}" + ls32,
      prefix(2) + "::(" + h + ":){2}" + ls32,
      prefix(3) + "::" + h + ":" + ls32,
      prefix(4) + "::" + ls32,
      prefix(5) + "::" + h,
      prefix(6) + "::",
  };
  std::string out = "(";
  for (size_t i = 0; i < forms.size(); ++i) out += (i ? "|" : "") + forms[i];
  return out + ")";
}

std::string date_regex() {
  const std::string year = "[0-9]{4}";
  const std::string leap = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00|0000)";
  return "(" + year + "-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|" + year + "-(0[469]|11)-(0[1-9]|[12][0-9]|30)|" +
         year + "-02-(0[1-9]|1[0-9]|2[0-8])|" + leap + "-02-29)";
}

std::string two(int v) { return fmt::format("{:02d}", v); }

// RFC 3339 full-time. A leap second (:60) is only valid at 23:59 UTC, so each local hour/minute
// admits :60 only with the offsets that map it to 23:59 UTC.
ExprPtr time_expr() {
  RegexOptions options;
  options.encoder = json_string_encoder();
  options.keyword = "format";
  const std::string frac = "(\\.[0-9]+)?";
  const std::string offset = "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  ExprPtr regular = parse_regex("([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]" + frac + offset, options);
  std::vector<ExprPtr> leap{parse_regex("23:59:60" + frac + "[Zz]", options)};
  for (int sign : {1, -1}) {
    for (int off = 0; off < 24 * 60; ++off) {
      int local = ((23 * 60 + 59 + sign * off) % 1440 + 1440) % 1440;
      std::string tail = fmt::format("{}{}:{}", sign > 0 ? '+' : '-', two(off / 60), two(off % 60));
      leap.push_back(make_seq({make_literal(two(local / 60) + ":" + two(local % 60) + ":60"),
                               parse_regex(frac, options), make_literal(tail)}));
    }
  }
  return make_alt({regular, make_alt(std::move(leap))});
}

std::string hostname_label() { return "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"; }

std::string email_regex() {
  const std::string atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
  const std::string local = "(" + atext + "+(\\." + atext + "+)*|\"([^\"\\\\]|\\\\.)*\")";
  const std::string domain = "(" + hostname_label() + "(\\." + hostname_label() + ")*|\\[" + kIpv4 +
                             "\\]|\\[IPv6:" + ipv6_regex() + "\\])";
  return local + "@" + domain;
}

// RFC 3986 URIs and URI references; with `international`, RFC 3987 IRIs (ucschar allowed where
// unreserved characters are, private-use characters in the query).
std::string uri_regex(bool international, bool reference) {
  const std::string ucschar =
      international ? "\\u{A0}-\\u{D7FF}\\u{F900}-\\u{FDCF}\\u{FDF0}-\\u{FFEF}\\u{10000}-\\u{1FFFD}\\u{20000}-\\u{2FFFD}"
                      "\\u{30000}-\\u{3FFFD}\\u{40000}-\\u{4FFFD}\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}"
                      "\\u{70000}-\\u{7FFFD}\\u{80000}-\\u{8FFFD}\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}"
                      "\\u{B0000}-\\u{BFFFD}\\u{C0000}-\\u{CFFFD}\\u{D0000}-\\u{DFFFD}\\u{E1000}-\\u{EFFFD}"
                    : "";
  const std::string iprivate = international ? "|[\\u{E000}-\\u{F8FF}\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}]" : "";
  const std::string unreserved = "[A-Za-z0-9._~" + ucschar + "-]", pct = "%[0-9A-Fa-f]{2}", subdelims = "[!$&'()*+,;=]";
  const std::string pchar = "(" + unreserved + "|" + pct + "|" + subdelims + "|[:@])";
  const std::string userinfo = "(" + unreserved + "|" + pct + "|" + subdelims + "|:)*";
  const std::string ascii_unreserved = "[A-Za-z0-9._~-]";
  const std::string ip_literal =
      "\\[(" + ipv6_regex() + "|[vV][0-9a-fA-F]+\\.(" + ascii_unreserved + "|" + subdelims + "|:)+)\\]";
  const std::string reg_name = "(" + unreserved + "|" + pct + "|" + subdelims + ")*";
  const std::string host = "(" + ip_literal + "|" + kIpv4 + "|" + reg_name + ")";
  const std::string authority = "(" + userinfo + "@)?" + host + "(:[0-9]*)?";
  const std::string segment = pchar + "*", segment_nz = pchar + "+";
  const std::string path_tail = "(/" + segment + ")*";
  const std::string query = "(\\?(" + pchar + "|[/?]" + iprivate + ")*)?", fragment = "(#(" + pchar + "|[/?])*)?";
  const std::string network_or_absolute = "//" + authority + path_tail + "|/(" + segment_nz + path_tail + ")?";
  const std::string absolute = "[A-Za-z][A-Za-z0-9+.-]*:(" + network_or_absolute + "|" + segment_nz + path_tail + "|)" +
                               query + fragment;
  if (!reference) return absolute;
  // relative-ref: the first segment of a relative path may not hold a colon (it would read as a scheme).
  const std::string segment_nz_nc = "(" + unreserved + "|" + pct + "|" + subdelims + "|@)+";
  const std::string relative = "(" + network_or_absolute + "|" + segment_nz_nc + path_tail + "|)" + query + fragment;
  return "(" + absolute + "|" + relative + ")";
}

// RFC 3339 appendix A durations: weeks stand alone; each unit may only be followed by the next.
std::string duration_regex() {
  const std::string n = "[0-9]+";
  const std::string time = "T(" + n + "H(" + n + "M(" + n + "S)?)?|" + n + "M(" + n + "S)?|" + n + "S)";
  const std::string date = "(" + n + "D|" + n + "M(" + n + "D)?|" + n + "Y(" + n + "M(" + n + "D)?)?)";
  return "P(" + date + "(" + time + ")?|" + time + "|" + n + "W)";
}

const std::string kJsonPointer = "(/([^~/]|~[01])*)*";

// RFC 6570 level 4 templates. The apostrophe is allowed in literals as the JSON Schema test
// suite expects (RFC 6570 erratum); ucschar and iprivate as in RFC 3987.
std::string uri_template_regex() {
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string literal =
      "([!#$&'(-;=?-\\[\\]_a-z~\\u{A0}-\\u{D7FF}\\u{E000}-\\u{FDCF}\\u{FDF0}-\\u{FFEF}\\u{10000}-\\u{1FFFD}"
      "\\u{20000}-\\u{2FFFD}\\u{30000}-\\u{3FFFD}\\u{40000}-\\u{4FFFD}\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}"
      "\\u{70000}-\\u{7FFFD}\\u{80000}-\\u{8FFFD}\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}\\u{B0000}-\\u{BFFFD}"
      "\\u{C0000}-\\u{CFFFD}\\u{D0000}-\\u{DFFFD}\\u{E1000}-\\u{EFFFD}\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}]|" +
      pct + ")";
  const std::string varchar = "([A-Za-z0-9_]|" + pct + ")";
  const std::string varspec = varchar + "(\\.?" + varchar + ")*(:[1-9][0-9]{0,3}|\\*)?";
  const std::string expression = "\\{[+#./;?&=,!@|]?" + varspec + "(," + varspec + ")*\\}";
  return "(" + literal + "|" + expression + ")*";
}

}  // namespace

ExprPtr format_content_expr(const std::string& format) {
  RegexOptions options;
  options.encoder = json_string_encoder();
  options.keyword = "format";
  if (format == "time") return time_expr();
  if (format == "date-time") {
    return make_seq({parse_regex(date_regex() + "[Tt]", options), time_expr()});
  }
  static const std::map<std::string, std::function<std::string()>> kRegexes = {
      {"date", date_regex},
      {"uuid", [] { return std::string("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"); }},
      {"ipv4", [] { return kIpv4; }},
      {"ipv6", ipv6_regex},
      {"email", email_regex},
      {"uri", [] { return uri_regex(false, false); }},
      {"uri-reference", [] { return uri_regex(false, true); }},
      {"iri", [] { return uri_regex(true, false); }},
      {"iri-reference", [] { return uri_regex(true, true); }},
      {"uri-template", uri_template_regex},
      {"duration", duration_regex},
      {"json-pointer", [] { return kJsonPointer; }},
      {"relative-json-pointer", [] { return "(0|[1-9][0-9]*)(#|" + kJsonPointer + ")"; }},
  };
  auto it = kRegexes.find(format);
  if (it == kRegexes.end()) throw_unsupported("format", fmt::format("format '{}' is not supported", format));
  return parse_regex(it->second(), options);
}

}  // namespace deepinfer::structured::json_internal
