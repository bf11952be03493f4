#ifndef TC_ATTRS_TD
#define TC_ATTRS_TD

include "ir/dialect/TCBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def TC_ShardingAttr : AttrDef<TC_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a value is split over a device mesh";
  let description = [{
    In the style of OpenXLA's Shardy: `#tc.sharding<@mesh, [["data"], [],
    ["model"]]>` names a `tc.mesh` and, for each tensor dimension, the mesh
    axes it is split over (major to minor). A dimension with no axes is
    replicated along it. Each mesh axis appears at most once, and a static
    dim must divide by the product of its axes' sizes.
  }];
  let parameters = (ins "::mlir::FlatSymbolRefAttr":$mesh, "::mlir::ArrayAttr":$dims);
  let assemblyFormat = "`<` $mesh `,` $dims `>`";
}

// A shape attribute: an array whose entries are integers (static dims, -1 to
// infer in reshape) or strings (symbolic dims such as "B" or "B*T").
def TC_DimsAttr : ConfinedAttr<ArrayAttr, [AttrConstraint<CPred<[{
    ::llvm::all_of(::llvm::cast<::mlir::ArrayAttr>($_self), [](::mlir::Attribute a) {
      return ::llvm::isa<::mlir::IntegerAttr, ::mlir::StringAttr>(a); })}]>,
    "entries that are integers or dim strings">]>;

#endif // TC_ATTRS_TD
