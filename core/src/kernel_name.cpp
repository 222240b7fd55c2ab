// Kernel names (kernel_name.h): abi::__cxa_demangle and a bracket-aware scan for the base name.
// No caching here (callers cache per distinct name) and no CUDA.
#include "tracerun/core/kernel_name.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <vector>

namespace tracerun::core {
namespace {

bool endsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The top-level pieces of a qualified name: where each component starts, after the last
// top-level space (what precedes it is the return type). Brackets () {} [] nest strictly; < >
// count only where a '<' is open on top of the stack, so a stray '>' in an expression inside
// parentheses (a template argument like `(4>3)`) does not unbalance the scan. False when the
// brackets do not balance.
bool components(std::string_view s, std::vector<size_t>* starts) {
  std::vector<char> open;
  size_t lastSpace = 0;
  std::vector<size_t> colons;  // positions after each top-level "::"
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    switch (c) {
      case '(':
      case '{':
      case '[':
      case '<':
        open.push_back(c);
        break;
      case '>':
        if (!open.empty() && open.back() == '<') open.pop_back();
        break;
      case ')':
      case '}':
      case ']': {
        const char want = c == ')' ? '(' : c == '}' ? '{' : '[';
        while (!open.empty() && open.back() == '<') open.pop_back();  // a stray '<' inside
        if (open.empty() || open.back() != want) return false;
        open.pop_back();
        break;
      }
      case ' ':
        if (open.empty()) {
          lastSpace = i + 1;
          colons.clear();
        }
        break;
      case ':':
        if (open.empty() && i + 1 < s.size() && s[i + 1] == ':') {
          colons.push_back(i + 2);
          ++i;
        }
        break;
      default:
        break;
    }
  }
  if (!open.empty()) return false;
  starts->clear();
  starts->push_back(lastSpace);
  for (size_t p : colons) starts->push_back(p);
  return true;
}

// A component without its template arguments: cut at its first top-level '<' when it ends with
// '>' ("Kernel2<cutlass_...>" -> "Kernel2"); "{lambda(float)#1}" and "operator()" stay whole.
std::string_view withoutTemplateArgs(std::string_view c) {
  if (!endsWith(c, ">")) return c;
  int depth = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const char ch = c[i];
    if (ch == '(' || ch == '{' || ch == '[') ++depth;
    if (ch == ')' || ch == '}' || ch == ']') --depth;
    if (ch == '<' && depth == 0 && i > 0) return c.substr(0, i);
  }
  return c;
}

// The parameter list's opening parenthesis of a name ending in ')', or npos.
size_t parameterList(std::string_view s) {
  if (!endsWith(s, ")")) return std::string_view::npos;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

}  // namespace

std::string demangleKernelName(std::string_view mangled) {
  if (mangled.size() < 2 || mangled.substr(0, 2) != "_Z") return std::string(mangled);
  const std::string name(mangled);  // NUL-terminated for the C API
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> text(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || text == nullptr) return name;
  return std::string(text.get());
}

std::string kernelShortName(std::string_view demangled) {
  std::string_view s = trim(demangled);
  if (s.empty()) return std::string(demangled);
  // Trailing qualifiers of a member function, then the parameter list.
  for (bool again = true; again;) {
    again = false;
    for (std::string_view q : {" const", " volatile", " &&", " &", " noexcept"}) {
      if (endsWith(s, q)) {
        s = trim(s.substr(0, s.size() - q.size()));
        again = true;
      }
    }
  }
  if (const size_t p = parameterList(s); p != std::string_view::npos && p > 0) {
    s = trim(s.substr(0, p));
  }
  std::vector<size_t> starts;
  if (s.empty() || !components(s, &starts)) return std::string(trim(demangled));
  auto component = [&](size_t i) {
    const size_t from = starts[i];
    const size_t to = i + 1 < starts.size() ? starts[i + 1] - 2 : s.size();
    return withoutTemplateArgs(s.substr(from, to - from));
  };
  const size_t last = starts.size() - 1;
  std::string base(component(last));
  if (base.rfind("operator", 0) == 0 && last > 0)
    base = std::string(component(last - 1)) + "::" + base;
  if (base.empty()) return std::string(trim(demangled));
  return base;
}

}  // namespace tracerun::core
