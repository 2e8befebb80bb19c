// What bytes mean on EVM chains: read by the wallet adapters and by the server alike.

export { authorizationFields } from '../../src/actions/eip712Structs.js'
export { eip155Account, eip155ChainId, erc20Asset, nativeAsset, parseEip155Account } from './caip.js'
export {
  assertTransactionChain,
  type DecodedEvmAction,
  decodeEvmAction,
  decodeEvmRequest,
  type EvmActionRequest,
  type EvmSignable,
  evmForwardParams,
} from './decodeEvmAction.js'
export { decodeErc20Call, decodeTransaction, erc20Selectors } from './decodeTransaction.js'
export {
  authorizationKinds,
  type DecodedTypedData,
  decodeTypedData,
  permitFields,
} from './decodeTypedData.js'
export { assertEvmMethod, type EvmMethod, evmMethods } from './methods.js'
export {
  parsePersonalSignParams,
  parseTransactionParams,
  parseTypedDataParams,
  type RpcTransaction,
  type TypedDataDomainPayload,
  type TypedDataPayload,
  toBigInt,
} from './params.js'
export {
  decodePermit2TypedData,
  isPermit2TypedData,
  type Permit2Transfer,
  permit2Address,
  permit2AllowanceAbi,
  permit2Hash,
  permit2TypedData,
  permit2WitnessHash,
  permit2WitnessTypeString,
  permit2WitnessTypes,
} from './permit2.js'
export type { EvmDecodePolicy } from './policy.js'
