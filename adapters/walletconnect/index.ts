export type {
  WalletConnectClient,
  WalletConnectNamespace,
  WalletConnectRequestParams,
  WalletConnectSession,
} from './types.js'
export {
  type WalletConnectForwardParams,
  type WalletConnectInspect,
  type WalletConnectSignatureStatus,
  type WalletConnectSigner,
  type WalletConnectSignerBaseOptions,
  type WalletConnectSignerOptions,
  type WalletConnectSignersOptions,
  walletConnectSigner,
  walletConnectSigners,
} from './walletConnectSigner.js'
