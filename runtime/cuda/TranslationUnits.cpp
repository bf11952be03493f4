#include "runtime/cuda/TranslationUnits.h"

#include "runtime/artifact/CudaSource.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <unordered_map>

namespace tensorc::cuda {

namespace {

// NVRTC takes about a second for a fused attention kernel (its macros
// instantiate a whole tiled kernel) and ~0.07 s for a loop-nest variant; a
// chain kernel about as much as its nests' kernels would (BERT-base's
// backward, NVVM's time per kernel: 0.03-0.06 s a loop variant, 0.69 s a
// 16-nest chain variant), so a chain variant counts one per nest.
constexpr int64_t kAttentionCost = 12;
// A part costs little beyond its kernels (the shared text: 0.11 s), so
// parts are sized for the threads: the 55 kernels a 4-layer BERT-base
// backward loads (its expected variants), one thread each part on this
// 2-core machine: one part 3.8 s; 16 parts 3.7 s together, the longest
// 0.51 s (with 48 a part, as before, they were one part at load).
constexpr int64_t kCostPerPart = 4;

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

// A __device__ function of the generated kernels (the text after the
// marker line codegen/cuda writes before them): its lines and its name.
struct Definition {
  size_t firstLine, lastLine; // inclusive
  std::string name;
};

bool isIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The function definitions after kGeneratedKernelsMarker: a "__device__"
// line (after a "template <...>" line or not) that is the whole function
// or opens one closed by a "}" line. Empty where the marker is missing or
// a definition's braces do not balance (nothing is pruned then).
std::vector<Definition> definitionsOf(const std::string &s, const std::vector<Line> &lines) {
  size_t start = 0;
  while (start < lines.size() && textOf(s, lines[start]) != artifact::kGeneratedKernelsMarker)
    ++start;
  std::vector<Definition> out;
  for (size_t i = start + 1; i < lines.size(); ++i) {
    size_t decl = i;
    if (startsWith(s, lines[i], "template <") && i + 1 < lines.size())
      decl = i + 1;
    if (!startsWith(s, lines[decl], "__device__ "))
      continue;
    std::string head = textOf(s, lines[decl]);
    size_t paren = head.find('(');
    size_t end = paren == std::string::npos ? 0 : paren;
    while (end > 0 && head[end - 1] == ' ')
      --end;
    size_t begin = end;
    while (begin > 0 && isIdentifierChar(head[begin - 1]))
      --begin;
    if (begin == end)
      return {};
    size_t last = decl;
    if (!head.empty() && head.back() == '{')
      while (last < lines.size() && textOf(s, lines[last]) != "}")
        ++last;
    if (last == lines.size())
      return {};
    int64_t depth = 0;
    for (size_t l = decl; l <= last; ++l)
      for (size_t c = lines[l].begin; c < lines[l].end; ++c)
        depth += s[c] == '{' ? 1 : s[c] == '}' ? -1 : 0;
    if (depth != 0)
      return {};
    out.push_back({i, last, head.substr(begin, end - begin)});
    i = last;
  }
  return out;
}

// For each line, the definitions whose names it mentions.
std::vector<std::vector<size_t>> mentionsOf(const std::string &s, const std::vector<Line> &lines,
                                            const std::vector<Definition> &definitions) {
  std::unordered_map<std::string, std::vector<size_t>> byName;
  for (size_t d = 0; d < definitions.size(); ++d)
    byName[definitions[d].name].push_back(d);
  std::vector<std::vector<size_t>> out(lines.size());
  for (size_t l = 0; l < lines.size(); ++l) {
    const Line &line = lines[l];
    for (size_t c = line.begin; c < line.end;) {
      if (!isIdentifierChar(s[c]) || (c > line.begin && isIdentifierChar(s[c - 1]))) {
        ++c;
        continue;
      }
      size_t e = c;
      while (e < line.end && isIdentifierChar(s[e]))
        ++e;
      if (s[c] == 't' && e - c > 3) { // generated names start "tc_"
        auto it = byName.find(s.substr(c, e - c));
        if (it != byName.end())
          out[l].insert(out[l].end(), it->second.begin(), it->second.end());
      }
      c = e;
    }
  }
  return out;
}

// Which lines of `lines` a part with the statements `mine` (per statement:
// in this part or not) keeps: shared text, its statements, and the
// generated functions they use (transitively); another part's statement or
// a function no statement of this part uses is left out.
std::vector<bool> linesOfPart(const std::vector<Line> &lines, const std::vector<Statement> &statements,
                              const std::vector<bool> &mine, const std::vector<Definition> &definitions,
                              const std::vector<std::vector<size_t>> &mentions) {
  std::vector<bool> keep(lines.size(), true);
  for (size_t k = 0; k < statements.size(); ++k)
    if (!mine[k])
      for (size_t l = statements[k].firstLine; l <= statements[k].lastLine; ++l)
        keep[l] = false;
  if (definitions.empty())
    return keep;
  std::vector<bool> used(definitions.size(), false);
  std::vector<size_t> work;
  auto use = [&](size_t line) {
    for (size_t d : mentions[line])
      if (!used[d]) {
        used[d] = true;
        work.push_back(d);
      }
  };
  for (size_t k = 0; k < statements.size(); ++k)
    if (mine[k])
      for (size_t l = statements[k].firstLine; l <= statements[k].lastLine; ++l)
        use(l);
  while (!work.empty()) {
    size_t d = work.back();
    work.pop_back();
    for (size_t l = definitions[d].firstLine; l <= definitions[d].lastLine; ++l)
      use(l);
  }
  for (size_t d = 0; d < definitions.size(); ++d)
    if (!used[d])
      for (size_t l = definitions[d].firstLine; l <= definitions[d].lastLine; ++l)
        keep[l] = false;
  return keep;
}

// The source with only the lines `keep` says, the others empty (line
// numbers stay the source's, for NVRTC's messages).
std::string withLines(const std::string &s, const std::vector<Line> &lines, const std::vector<bool> &keep) {
  std::string out;
  out.reserve(s.size());
  for (size_t l = 0; l < lines.size(); ++l) {
    if (keep[l])
      out.append(s, lines[l].begin, lines[l].end - lines[l].begin);
    else if (s[lines[l].end - 1] == '\n')
      out.push_back('\n');
  }
  return out;
}

// The statements in groups that share a generated function they call
// directly (union-find over the functions each statement's lines name),
// each group in source order; a group costing more than a part's share of
// the whole is cut into pieces of about that share, so one heavily shared
// function cannot hold the parallelism back.
std::vector<std::vector<size_t>> groupsByCallee(const std::vector<Statement> &statements,
                                                const std::vector<std::vector<size_t>> &mentions,
                                                size_t definitionCount, size_t parts) {
  std::vector<size_t> parent(statements.size());
  for (size_t k = 0; k < parent.size(); ++k)
    parent[k] = k;
  auto root = [&](size_t k) {
    while (parent[k] != k)
      k = parent[k] = parent[parent[k]];
    return k;
  };
  std::vector<size_t> caller(definitionCount, SIZE_MAX); // a statement calling the function
  for (size_t k = 0; k < statements.size(); ++k)
    for (size_t l = statements[k].firstLine; l <= statements[k].lastLine; ++l)
      for (size_t d : mentions[l]) {
        if (caller[d] == SIZE_MAX)
          caller[d] = k;
        else
          parent[root(k)] = root(caller[d]);
      }
  int64_t total = 0;
  for (const Statement &st : statements)
    total += st.cost;
  const int64_t share = std::max<int64_t>(1, (total + int64_t(parts) - 1) / int64_t(parts));
  std::map<size_t, std::vector<size_t>> byRoot;
  for (size_t k = 0; k < statements.size(); ++k)
    byRoot[root(k)].push_back(k);
  std::vector<std::vector<size_t>> out;
  for (auto &[r, members] : byRoot) {
    out.emplace_back();
    int64_t cost = 0;
    for (size_t k : members) {
      if (cost > 0 && cost + statements[k].cost > share) {
        out.emplace_back();
        cost = 0;
      }
      out.back().push_back(k);
      cost += statements[k].cost;
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
  std::vector<Line> lines = linesOf(source);
  std::vector<Statement> statements = statementsOf(source, lines);
  const std::vector<Definition> definitions = definitionsOf(source, lines);
  const std::vector<std::vector<size_t>> mentions = mentionsOf(source, lines, definitions);
  if (parts <= 1 || statements.size() < 2) // one part: without what no statement uses
    return {withLines(source, lines, linesOfPart(lines, statements, std::vector<bool>(statements.size(), true),
                                                 definitions, mentions))};
  // Statements that call one generated function directly (a kernel's
  // variants: _b256_i1, _b128_i1, _b256_i4_v4, ... of one body) go to one
  // part: spread over parts, each part parsed and optimized the body again
  // (a 4-layer BERT-base-shaped forward, all its 199 kernel variants, 16
  // parts one after another: 30.7 s of NVRTC against 12.6 s in one part;
  // grouped, 8.6 s, the longest part 0.79 s).
  std::vector<std::vector<size_t>> groups = groupsByCallee(statements, mentions, definitions.size(), parts);
  parts = std::min(parts, groups.size());
  // Each group to the part with the least cost so far, costliest first
  // (longest-processing-time scheduling).
  std::vector<int64_t> groupCost(groups.size(), 0);
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t k : groups[g])
      groupCost[g] += statements[k].cost;
  std::vector<size_t> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groupCost[a] > groupCost[b]; });
  std::vector<int64_t> load(parts, 0);
  std::vector<size_t> partOf(statements.size());
  for (size_t g : order) {
    size_t p = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[p] += groupCost[g];
    for (size_t k : groups[g])
      partOf[k] = p;
  }
  // Every part keeps every line's place (another part's statement, or a
  // function none of its statements uses, as an empty line), so NVRTC's
  // line numbers in errors are the source's.
  std::vector<std::string> out(parts);
  for (size_t p = 0; p < parts; ++p) {
    std::vector<bool> mine(statements.size());
    for (size_t k = 0; k < statements.size(); ++k)
      mine[k] = partOf[k] == p;
    out[p] = withLines(source, lines, linesOfPart(lines, statements, mine, definitions, mentions));
  }
  return out;
}

} // namespace tensorc::cuda
