#pragma once
// Syntax tree of a parsed template (internal to the Jinja subset).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "encoding/jinja/value.h"

namespace deepinfer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kAttribute,  // children[0].name
    kItem,       // children[0][children[1]]
    kSlice,      // children[0][children[1]:children[2]:children[3]] (null children = omitted)
    kCall,       // children[0](children[1..], kwargs)
    kFilter,     // children[0] | name(children[1..], kwargs)
    kTest,       // children[0] is [not] name(children[1..])
    kUnary,      // op children[0]   (op: "not", "-", "+")
    kBinary,     // children[0] op children[1]
    kCondition,  // children[0] if children[1] else children[2] (children[2] may be null)
    kList,       // [children...]
    kDict,       // {children[2i]: children[2i+1]}
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // name / attribute / filter / test / operator
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kBreak, kContinue };
  Kind kind;
  int line = 0;
  std::string text;                                   // kText
  ExprPtr expr;                                       // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, NodeList>> branches; // kIf: condition (null = else), body
  std::vector<std::string> targets;                   // kFor / kSet / kSetBlock target names
  std::string attribute;                              // kSet/kSetBlock: ns.attribute target
  ExprPtr loop_filter;                                // kFor: "for x in y if cond"
  NodeList body;                                      // kFor body, kSetBlock body
  NodeList else_body;                                 // kFor else
};

}  // namespace deepinfer::jinja
