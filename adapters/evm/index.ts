export {
  type DecodedTypedData,
  decodeEvmAction,
  decodeTransaction,
  decodeTypedData,
  type EvmActionRequest,
  type EvmMethod,
  evmForwardParams,
  evmMethods,
  parsePersonalSignParams,
  parseTransactionParams,
  parseTypedDataParams,
  type RpcTransaction,
  type TypedDataDomainPayload,
  type TypedDataPayload,
} from '../../protocol/evm/index.js'
export type { ReceiptOptions } from './backend.js'
export type { Eip1193Provider } from './eip1193Backend.js'
export {
  type EvmChainConfig,
  type EvmSigner,
  type EvmSignerOptions,
  type EvmSignerPolicy,
  evmSigner,
  type SignMessageRequest,
} from './evmSigner.js'
export { evmMandateStatus, permit2RevokeCall } from './mandates.js'
export { type EvmNode, evmSignatureStatus } from './signatureStatus.js'
