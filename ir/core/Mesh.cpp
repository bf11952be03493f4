#include "ir/core/Mesh.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <set>

namespace tensorc {

int64_t Mesh::numDevices() const {
  int64_t devices = 1;
  for (int64_t s : sizes)
    devices *= s; // checkMesh bounds the product by 2^24
  return devices;
}

void checkMesh(const Mesh &m) {
  std::string what = "mesh \"" + m.name + "\"";
  check(!m.axes.empty() && m.axes.size() == m.sizes.size(),
        what + ": axes and sizes must be non-empty and of equal length");
  std::set<std::string> names;
  int64_t devices = 1;
  for (size_t i = 0; i < m.axes.size(); ++i) {
    check(!m.axes[i].empty(), what + " has an empty axis name");
    check(names.insert(m.axes[i]).second, what + ": axis \"" + m.axes[i] + "\" appears twice");
    check(m.sizes[i] >= 1 && m.sizes[i] <= (1 << 20),
          what + ": axis \"" + m.axes[i] + "\" has size " + std::to_string(m.sizes[i]) +
              "; sizes must be in [1, 2^20]");
    devices *= m.sizes[i]; // at most 2^24 * 2^20 before the check: no overflow
    check(devices <= (1 << 24), what + " has more than 2^24 devices (the product of its sizes)");
  }
}

const Mesh &findMesh(const std::vector<Mesh> &meshes, const std::string &name) {
  for (const Mesh &m : meshes)
    if (m.name == name)
      return m;
  std::string known;
  for (const Mesh &m : meshes)
    known += (known.empty() ? "" : ", ") + ("\"" + m.name + "\"");
  fail("mesh \"" + name + "\" is not declared" +
       (known.empty() ? std::string(" (the graph declares no meshes)") : "; meshes: " + known));
}

DeviceGroups::DeviceGroups(const Mesh &mesh, const std::vector<std::string> &axes) : mesh_(mesh) {
  check(!axes.empty(), "axes is empty; a collective names at least one mesh axis");
  for (const std::string &axis : axes) {
    auto it = std::find(mesh.axes.begin(), mesh.axes.end(), axis);
    check(it != mesh.axes.end(), "axis \"" + axis + "\" is not an axis of mesh \"" + mesh.name + "\"");
    size_t position = size_t(it - mesh.axes.begin());
    check(std::find(axisPositions_.begin(), axisPositions_.end(), position) == axisPositions_.end(),
          "axis \"" + axis + "\" appears twice in axes");
    axisPositions_.push_back(position);
    groupSize_ *= mesh.sizes[position];
  }
}

std::vector<int64_t> DeviceGroups::coordinates(int64_t device) const {
  std::vector<int64_t> coords(mesh_.sizes.size());
  for (size_t i = mesh_.sizes.size(); i-- > 0;) {
    coords[i] = device % mesh_.sizes[i];
    device /= mesh_.sizes[i];
  }
  return coords;
}

int64_t DeviceGroups::deviceAt(const std::vector<int64_t> &coords) const {
  int64_t device = 0;
  for (size_t i = 0; i < coords.size(); ++i)
    device = device * mesh_.sizes[i] + coords[i];
  return device;
}

int64_t DeviceGroups::rankOf(int64_t device) const {
  std::vector<int64_t> coords = coordinates(device);
  int64_t rank = 0;
  for (size_t position : axisPositions_)
    rank = rank * mesh_.sizes[position] + coords[position];
  return rank;
}

std::vector<int64_t> DeviceGroups::groupOf(int64_t device) const {
  std::vector<int64_t> coords = coordinates(device);
  std::vector<int64_t> group(static_cast<size_t>(groupSize_));
  for (int64_t rank = 0; rank < groupSize_; ++rank) {
    int64_t rest = rank;
    for (size_t i = axisPositions_.size(); i-- > 0;) {
      int64_t size = mesh_.sizes[axisPositions_[i]];
      coords[axisPositions_[i]] = rest % size;
      rest /= size;
    }
    group[size_t(rank)] = deviceAt(coords);
  }
  return group;
}

} // namespace tensorc
