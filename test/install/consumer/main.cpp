// Loads an artifact with the installed C++ API and runs it on zeros with
// every symbolic dim set to 2.
#include <tensorc/Runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  namespace rt = tensorc::runtime;
  try {
    auto exe = rt::Executable::load(argv[1]);
    std::vector<rt::Tensor> inputs;
    std::vector<rt::TensorView> views;
    for (const rt::TensorInfo &in : exe->inputs()) {
      std::vector<int64_t> shape;
      for (const std::string &d : in.shape)
        shape.push_back(d.find_first_not_of("0123456789") == std::string::npos ? std::stoll(d) : 2);
      inputs.emplace_back(in.dtype, shape);
      std::memset(inputs.back().data(), 0, inputs.back().nbytes());
      views.push_back(inputs.back().view());
    }
    rt::Session session(exe);
    std::vector<rt::Tensor> out = session.run(views);
    for (size_t i = 0; i < out.size(); ++i)
      std::printf("%s: %s, %lld elements\n", exe->outputs()[i].name.c_str(),
                  rt::elementTypeName(out[i].dtype()), (long long)out[i].numel());
  } catch (const rt::Error &e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
