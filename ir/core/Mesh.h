// Device meshes and the device groups that collectives communicate in.
//
// A mesh names its axes and their sizes: `data=2, model=4` is 8 devices. A
// device's index is its row-major coordinate over the mesh's axes (the last
// axis varies fastest), so device 5 of that mesh is (data 1, model 1). A
// collective over a list of axes groups the devices that agree on every
// other axis; within a group, a device's rank is the row-major index of its
// coordinates on the listed axes, in the order listed. The exact semantics
// of each collective are in docs/sharding.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensorc {

struct Mesh {
  std::string name;
  std::vector<std::string> axes;
  std::vector<int64_t> sizes;

  int64_t numDevices() const;
  bool operator==(const Mesh &o) const {
    return name == o.name && axes == o.axes && sizes == o.sizes;
  }
};

// Throws Error unless `mesh` is well formed: equal non-empty axes and sizes,
// distinct non-empty axis names, sizes in [1, 2^20], at most 2^24 devices.
void checkMesh(const Mesh &mesh);
// The mesh called `name`; throws Error naming it when `meshes` has none.
const Mesh &findMesh(const std::vector<Mesh> &meshes, const std::string &name);

// The groups of a collective over `axes` of `mesh`. Construction checks the
// axes (non-empty, each in the mesh, none twice) and throws Error otherwise.
class DeviceGroups {
public:
  DeviceGroups(const Mesh &mesh, const std::vector<std::string> &axes);
  // Devices per group: the product of the listed axes' sizes.
  int64_t groupSize() const { return groupSize_; }
  // `device`'s rank within its group.
  int64_t rankOf(int64_t device) const;
  // The devices of `device`'s group, by rank.
  std::vector<int64_t> groupOf(int64_t device) const;

private:
  std::vector<int64_t> coordinates(int64_t device) const;
  int64_t deviceAt(const std::vector<int64_t> &coords) const;
  Mesh mesh_;
  std::vector<size_t> axisPositions_; // the listed axes, as positions in the mesh
  int64_t groupSize_ = 1;
};

} // namespace tensorc
