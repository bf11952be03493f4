#ifndef TC_TYPES_TD
#define TC_TYPES_TD

include "ir/dialect/TCBase.td"

def TC_TensorType : TypeDef<TC_Dialect, "TcTensor"> {
  let mnemonic = "tensor";
  let summary = "a ranked tensor with static or symbolic dims";
  let description = [{
    `!tc.tensor<[B, 784], f32>`: the shape in brackets, then the element type
    (f64, f32, f16, bf16, i64, i32 or i1). A dim is a positive integer or a
    monomial of named symbols (`B`, `B*T`, `4*H`); the same symbol anywhere in
    a module is the same size. `!tc.tensor<[], f32>` is a scalar.
  }];
  // `sizes[i]` is the static size, or ShapedType::kDynamic where
  // `symbols[i]` holds the monomial's text ("B*T"); symbols[i] is null for
  // static dims.
  let parameters = (ins ArrayRefParameter<"int64_t">:$sizes,
                        ArrayRefParameter<"::mlir::StringAttr">:$symbols,
                        "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def TC_Tensor : Type<CPred<"::llvm::isa<::tensorc::tc::TcTensorType>($_self)">,
                     "tc tensor", "::tensorc::tc::TcTensorType">;

#endif // TC_TYPES_TD
