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

std::string uri_regex() {
  const std::string unreserved = "[A-Za-z0-9._~-]", pct = "%[0-9A-Fa-f]{2}", subdelims = "[!$&'()*+,;=]";
  const std::string pchar = "(" + unreserved + "|" + pct + "|" + subdelims + "|[:@])";
  const std::string userinfo = "(" + unreserved + "|" + pct + "|" + subdelims + "|:)*";
  const std::string ip_literal = "\\[(" + ipv6_regex() + "|[vV][0-9a-fA-F]+\\.(" + unreserved + "|" + subdelims + "|:)+)\\]";
  const std::string reg_name = "(" + unreserved + "|" + pct + "|" + subdelims + ")*";
  const std::string host = "(" + ip_literal + "|" + kIpv4 + "|" + reg_name + ")";
  const std::string authority = "(" + userinfo + "@)?" + host + "(:[0-9]*)?";
  const std::string segment = pchar + "*", segment_nz = pchar + "+";
  const std::string hier = "(//" + authority + "(/" + segment + ")*|/(" + segment_nz + "(/" + segment + ")*)?|" +
                           segment_nz + "(/" + segment + ")*|)";
  const std::string tail = "(" + pchar + "|[/?])*";
  return "[A-Za-z][A-Za-z0-9+.-]*:" + hier + "(\\?" + tail + ")?(#" + tail + ")?";
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
      {"uri", uri_regex},
  };
  auto it = kRegexes.find(format);
  if (it == kRegexes.end()) throw_unsupported("format", fmt::format("format '{}' is not supported", format));
  return parse_regex(it->second(), options);
}

}  // namespace deepinfer::structured::json_internal
