export type { ReceiptOptions } from './backend.js'
export { decodeEvmAction, type EvmActionRequest } from './decodeEvmAction.js'
export { decodeTransaction } from './decodeTransaction.js'
export { type DecodedTypedData, decodeTypedData } from './decodeTypedData.js'
export type { Eip1193Provider } from './eip1193Backend.js'
export { type EvmChainConfig, type EvmSigner, type EvmSignerOptions, evmSigner } from './evmSigner.js'
export { type EvmMethod, evmMethods } from './methods.js'
export {
  parsePersonalSignParams,
  parseTransactionParams,
  parseTypedDataParams,
  type RpcTransaction,
  type TypedDataDomainPayload,
  type TypedDataPayload,
} from './params.js'
