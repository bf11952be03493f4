#include "runtime/cuda/TranslationUnits.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>

namespace tensorc::cuda {

namespace {

// NVRTC takes about a second for a fused attention kernel (its macros
// instantiate a whole tiled kernel) and ~0.08 s for a loop-nest variant; a
// chain kernel about as much as its nests' kernels would (BERT-base's
// backward, NVVM's time per kernel: 0.03-0.06 s a loop variant, 0.69 s a
// 16-nest chain variant), so a chain variant counts one per nest.
constexpr int64_t kAttentionCost = 12;
constexpr int64_t kCostPerPart = 48;

struct Line {
  size_t begin, end; // [begin, end) in the source, the newline included
};

std::vector<Line> linesOf(const std::string &s) {
  std::vector<Line> lines;
  for (size_t at = 0; at < s.size();) {
    size_t nl = s.find('\n', at);
    size_t end = nl == std::string::npos ? s.size() : nl + 1;
    lines.push_back({at, end});
    at = end;
  }
  return lines;
}

bool startsWith(const std::string &s, const Line &l, const char *prefix) {
  size_t n = std::char_traits<char>::length(prefix);
  return l.end - l.begin >= n && s.compare(l.begin, n, prefix) == 0;
}

// The line's text without its newline.
std::string textOf(const std::string &s, const Line &l) {
  size_t end = l.end;
  while (end > l.begin && (s[end - 1] == '\n' || s[end - 1] == '\r'))
    --end;
  return s.substr(l.begin, end - l.begin);
}

// A one-line extern "C" kernel definition (not a macro body's line, which
// ends with a backslash).
bool isKernelLine(const std::string &s, const Line &l) {
  if (!startsWith(s, l, "extern \"C\" __global__"))
    return false;
  std::string t = textOf(s, l);
  return !t.empty() && t.back() == '}';
}

// TC_NAME(...) at the start of a line, closed on it: a macro call.
bool isMacroCall(const std::string &s, const Line &l) {
  if (!startsWith(s, l, "TC_"))
    return false;
  std::string t = textOf(s, l);
  size_t open = t.find('(');
  if (open == std::string::npos || t.back() != ')')
    return false;
  for (size_t i = 3; i < open; ++i)
    if (!(std::isupper(static_cast<unsigned char>(t[i])) || std::isdigit(static_cast<unsigned char>(t[i])) ||
          t[i] == '_'))
      return false;
  return true;
}

struct Statement {
  size_t firstLine, lastLine; // inclusive
  int64_t cost;
};

// The nests of each chain kernel, from the comment codegen/cuda writes
// before its definitions ("// NAME: one row per block through N nests",
// "// NAME: N sibling elementwise nests").
std::map<std::string, int64_t> chainNests(const std::string &s, const std::vector<Line> &lines) {
  std::map<std::string, int64_t> out;
  for (const Line &l : lines) {
    if (!startsWith(s, l, "// tc_"))
      continue;
    std::string t = textOf(s, l);
    size_t colon = t.find(": ");
    if (colon == std::string::npos)
      continue;
    std::string name = t.substr(3, colon - 3), rest = t.substr(colon + 2);
    static const std::string through = "one row per block through ";
    const char *digits = rest.compare(0, through.size(), through) == 0 ? rest.c_str() + through.size()
                         : rest.find(" sibling elementwise nests") != std::string::npos ? rest.c_str()
                                                                                        : nullptr;
    if (!digits)
      continue;
    long long n = std::strtoll(digits, nullptr, 10);
    if (n > 0)
      out[name] = std::max<int64_t>(out[name], n);
  }
  return out;
}

// A kernel line's cost: its chain's nests for a chain variant
// (NAME_b<threads>..., NAME a chain of chainNests), else 1.
int64_t kernelCost(const std::string &line, const std::map<std::string, int64_t> &nests) {
  if (nests.empty())
    return 1;
  std::string name = kernelDefinedBy(line);
  size_t variant = name.rfind("_b");
  if (variant == std::string::npos)
    return 1;
  auto it = nests.find(name.substr(0, variant));
  return it == nests.end() ? 1 : it->second;
}

std::vector<Statement> statementsOf(const std::string &s, const std::vector<Line> &lines) {
  std::vector<Statement> out;
  const std::map<std::string, int64_t> nests = chainNests(s, lines);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (isKernelLine(s, lines[i])) {
      out.push_back({i, i, kernelCost(textOf(s, lines[i]), nests)});
    } else if (isMacroCall(s, lines[i])) {
      out.push_back({i, i, startsWith(s, lines[i], "TC_ATTENTION") ? kAttentionCost : 1});
    } else if (i + 2 < lines.size() && textOf(s, lines[i]) == "#if __CUDA_ARCH__ >= 900" &&
               isKernelLine(s, lines[i + 1]) && textOf(s, lines[i + 2]) == "#endif") {
      out.push_back({i, i + 2, kernelCost(textOf(s, lines[i + 1]), nests)});
      i += 2;
    }
  }
  return out;
}

} // namespace

std::string kernelDefinedBy(const std::string &line) {
  if (line.compare(0, 21, "extern \"C\" __global__") != 0)
    return "";
  // ... void [__cluster_dims__(...) ]__launch_bounds__(...) NAME(
  size_t at = line.find("__launch_bounds__(");
  if (at == std::string::npos)
    return "";
  at = line.find(')', at);
  if (at == std::string::npos)
    return "";
  ++at;
  while (at < line.size() && line[at] == ' ')
    ++at;
  size_t end = at;
  while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_'))
    ++end;
  if (end == at || end >= line.size() || line[end] != '(')
    return "";
  return line.substr(at, end - at);
}

KernelTiers splitKernelTiers(const std::string &source, const std::function<bool(const std::string &)> &wanted) {
  std::vector<Line> lines = linesOf(source);
  // Per line: 0 shared text, 1 a statement of `now`, 2 one of `later`.
  std::vector<int> tier(lines.size(), 0);
  KernelTiers out;
  for (const Statement &st : statementsOf(source, lines)) {
    std::string name;
    for (size_t l = st.firstLine; l <= st.lastLine && name.empty(); ++l)
      name = kernelDefinedBy(textOf(source, lines[l]));
    bool later = !name.empty() && !wanted(name);
    out.laterKernels += later ? 1 : 0;
    for (size_t l = st.firstLine; l <= st.lastLine; ++l)
      tier[l] = later ? 2 : 1;
  }
  out.now.reserve(source.size());
  out.later.reserve(out.laterKernels ? source.size() : 0);
  for (size_t l = 0; l < lines.size(); ++l) {
    const Line &line = lines[l];
    bool newline = source[line.end - 1] == '\n';
    auto keep = [&](std::string &unit, bool mine) {
      if (mine)
        unit.append(source, line.begin, line.end - line.begin);
      else if (newline)
        unit.push_back('\n');
    };
    keep(out.now, tier[l] != 2);
    if (out.laterKernels)
      keep(out.later, tier[l] != 1);
  }
  return out;
}

size_t translationUnitParts(const std::string &source, unsigned threads) {
  std::vector<Line> lines = linesOf(source);
  int64_t cost = 0;
  for (const Statement &st : statementsOf(source, lines))
    cost += st.cost;
  int64_t parts = std::min<int64_t>(std::max(1u, threads), std::max<int64_t>(1, cost / kCostPerPart));
  return size_t(parts);
}

std::vector<std::string> splitTranslationUnit(const std::string &source, size_t parts) {
  if (parts <= 1)
    return {source};
  std::vector<Line> lines = linesOf(source);
  std::vector<Statement> statements = statementsOf(source, lines);
  if (statements.size() < 2)
    return {source};
  parts = std::min(parts, statements.size());
  // Each statement to the part with the least cost so far, costliest first
  // (longest-processing-time scheduling).
  std::vector<size_t> order(statements.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return statements[a].cost > statements[b].cost; });
  std::vector<int64_t> load(parts, 0);
  std::vector<size_t> partOfLine(lines.size(), SIZE_MAX); // SIZE_MAX: shared text
  for (size_t k : order) {
    size_t p = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[p] += statements[k].cost;
    for (size_t l = statements[k].firstLine; l <= statements[k].lastLine; ++l)
      partOfLine[l] = p;
  }
  // Every part keeps every line (an instantiation of another part as an
  // empty line), so NVRTC's line numbers in errors are the source's.
  std::vector<std::string> out(parts);
  for (std::string &text : out)
    text.reserve(source.size());
  for (size_t l = 0; l < lines.size(); ++l) {
    const Line &line = lines[l];
    for (size_t p = 0; p < parts; ++p) {
      if (partOfLine[l] == SIZE_MAX || partOfLine[l] == p)
        out[p].append(source, line.begin, line.end - line.begin);
      else if (source[line.end - 1] == '\n')
        out[p].push_back('\n');
    }
  }
  return out;
}

} // namespace tensorc::cuda
