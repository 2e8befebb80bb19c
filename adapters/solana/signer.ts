import {
  bytesEqual,
  type DecodedSolanaTransaction,
  decodeSolanaTransaction,
  encodeBase64,
} from '../../protocol/solana/index.js'
import type { ActionInspection, Signer, SignerRequest } from '../../src/actions/types.js'
import { abortable } from '../../src/errors/abort.js'
import { PayError } from '../../src/errors/PayError.js'
import { readSolanaAssetInfo } from './assetInfo.js'
import {
  checkSolanaTransaction,
  inspectSolanaTransaction,
  type SolanaPolicyOptions,
} from './inspectSolanaTransaction.js'
import { type KitTransactionSigner, signWithKit } from './kitSigner.js'
import { canRevoke, mandateStatusFrom, revokeFrom } from './mandates.js'
import { readsFromConnection, readsFromKitRpc, type SolanaKitRpc, type SolanaNode } from './node.js'
import { signatureStatusFrom } from './signatureStatus.js'
import {
  isUserRejection,
  resolveSignTransactionFeature,
  type SolanaSignTransactionFeature,
  type SolanaSignTransactionFeatureInput,
  type WalletStandardSolanaAccount,
  walletStandardChains,
} from './walletStandard.js'
import { readX402Terms, type X402SolanaTerms, x402TransferProblem } from './x402Terms.js'

export const solanaSignTransactionMethod = 'solana_signTransaction'

export interface SolanaExpiryOptions {
  /**
   * The wallet's own node (a web3.js `Connection` to the signer's one chain). With it, a transaction
   * is signed only while the node accepts its blockhash, and the flow can learn what became of an
   * earlier signature (`signatureStatus`): landed means the option is paid; not landed with its
   * blockhash expired lets a rebuilt transaction be signed after `quote_expired`. Without it, an
   * earlier signature always counts against the option's amount. See docs/exposure.md. The review
   * names a mint from it (`describeAsset`: decimals, and a Token-2022 mint's own metadata symbol).
   */
  connection?: SolanaNode
  /** The same node as a @solana/kit `Rpc` (`createSolanaRpc(url)`), instead of `connection`. */
  rpc?: SolanaKitRpc
}

export interface SolanaWalletStandardSignerOptions extends SolanaPolicyOptions, SolanaExpiryOptions {
  account: WalletStandardSolanaAccount
  /** The wallet's `solana:signTransaction` feature, or its whole `features` record. */
  feature: SolanaSignTransactionFeatureInput
  /**
   * CAIP-2 chain ids to serve. Default: the account's chains mapped from Wallet Standard names
   * (`solana:mainnet`, `solana:devnet`); a local cluster must be listed here.
   */
  chains?: readonly string[]
}

export interface SolanaKitSignerOptions extends SolanaPolicyOptions, SolanaExpiryOptions {
  /**
   * A @solana/kit signer: a `TransactionPartialSigner` (a key pair signer) or a
   * `TransactionModifyingSigner` (a wallet-standard account through kit's wallet bridge). It is given
   * the checked message bytes only; a modifying signer that changes them is refused.
   */
  kitSigner: KitTransactionSigner
  /** CAIP-2 chain ids the signer may sign for. */
  chains: readonly string[]
}

/** What caipay/adapters/solana-kit signs with: no web3.js Keypair. */
export type SolanaSignerWithoutWeb3Options = SolanaWalletStandardSignerOptions | SolanaKitSignerOptions

export interface SolanaSigner extends Signer {
  readonly namespace: 'solana'
  readonly methods: readonly ['solana_signTransaction']
  /** Base58 public key of the signing account. */
  readonly address: string
  inspect(request: SignerRequest): ActionInspection
}

/** Signs the detached message bytes for one signer slot; returns the 64-byte signature. */
export type SignSlot = (
  decoded: DecodedSolanaTransaction,
  chainId: string,
  signal?: AbortSignal,
) => Promise<Uint8Array>

/**
 * A caipay signer for the `solana` namespace. It implements only `solana_signTransaction`: it
 * checks the service-built transaction, adds its signature next to the ones already there and
 * returns the complete transaction, base64. It never broadcasts; its node (`connection` or `rpc`), if
 * any, is only read.
 */
export function solanaSigner(options: SolanaSignerWithoutWeb3Options): SolanaSigner {
  return createSolanaSigner(
    'kitSigner' in options
      ? {
          address: options.kitSigner.address,
          chains: validateChains(options.chains),
          signSlot: (decoded, _chainId, signal) => signWithKit(options.kitSigner, decoded, signal),
        }
      : fromWalletStandard(options),
    options,
  )
}

/** A signer over one key's signing (`signSlot`), under the guard and the options' policy and node. */
export function createSolanaSigner(
  { address, chains, signSlot }: { address: string; chains: string[]; signSlot: SignSlot },
  options: SolanaPolicyOptions & SolanaExpiryOptions,
): SolanaSigner {
  const { connection, rpc } = options
  if (connection && rpc) {
    throw new PayError({
      code: 'invalid_signer',
      message: 'A Solana signer reads one node: give `connection` or `rpc`, not both.',
    })
  }
  const node = connection ? readsFromConnection(connection) : rpc ? readsFromKitRpc(rpc) : undefined
  if (node && chains.length !== 1) {
    throw new PayError({
      code: 'invalid_signer',
      message: 'A Solana signer with a connection serves exactly the connection’s chain.',
      context: { chains },
    })
  }
  const prepare = (request: SignerRequest) => decodeForSigner(request, address, chains, options)

  const signer: SolanaSigner = {
    namespace: 'solana',
    methods: [solanaSignTransactionMethod],
    address,
    accounts: () => chains.map((chain) => `${chain}:${address}`),
    inspect(request) {
      return inspectPrepared(prepare(request), address, request.chainId)
    },
    async request(request) {
      throwIfAborted(request.signal)
      const { decoded } = prepare(request)
      // A blockhash the wallet's node does not know yet cannot later be seen to expire, so it is
      // not signed: `signatureStatus` relies on it.
      if (node && !(await node.blockhashIsValid(decoded.recentBlockhash))) {
        throw new PayError({
          code: 'action_rejected',
          message: 'The Solana transaction’s blockhash is not valid on the wallet’s node.',
          context: { chainId: request.chainId, field: 'recentBlockhash', blockhash: decoded.recentBlockhash },
        })
      }
      throwIfAborted(request.signal)
      const signature = await signSlot(decoded, request.chainId, request.signal)
      throwIfAborted(request.signal)
      // Splice into the original bytes so the other signers' partial signatures and the exact
      // message stay as the service built them.
      const signed = decoded.bytes.slice()
      signed.set(signature, decoded.signatureOffset(decoded.signers.indexOf(address)))
      return encodeBase64(signed)
    },
    // The review names assets from here (never from the gateway): decimals of SOL, and of a mint as
    // the wallet's own node reads its account.
    describeAsset: (asset) => readSolanaAssetInfo(asset, chains[0]!, chains.length === 1 ? node : undefined),
  }
  if (node) signer.signatureStatus = signatureStatusFrom(node, address)
  // A node that reads token accounts and sends: the mandates the key granted are read and revoked
  // through it (docs/subscriptions.md).
  if (node && canRevoke(node)) {
    signer.mandateStatus = mandateStatusFrom(node, address, (request) => signer.inspect(request))
    signer.revokeMandate = (mandate, { signal } = {}) =>
      revokeFrom(
        node,
        mandate,
        (decoded) => signSlot(decoded, mandate.owner.slice(0, mandate.owner.lastIndexOf(':')), signal),
        { signal },
      )
  }
  return signer
}

export interface SolanaInspectorOptions extends SolanaPolicyOptions {
  /** Base58 address of the key that signs. */
  address: string
  /** CAIP-2 chain ids it signs for. */
  chains: readonly string[]
}

/**
 * The Solana signer's decoder on its own, for signers that forward to a remote wallet
 * (`walletConnectSigners(client, session, { inspect: { solana: solanaInspector({...}) } })`):
 * the same checks as `solanaSigner`, nothing signed.
 */
export function solanaInspector(
  options: SolanaInspectorOptions,
): (request: SignerRequest) => ActionInspection {
  const chains = validateChains(options.chains)
  return (request) =>
    inspectPrepared(
      decodeForSigner(request, options.address, chains, options),
      options.address,
      request.chainId,
    )
}

interface Prepared {
  decoded: DecodedSolanaTransaction
  /** The x402 payment the transaction was checked to be, exactly, when the request states one. */
  x402?: X402SolanaTerms
}

/** What signing would move; an x402 payment's transfer, checked to reach `payTo`'s account, names `payTo`. */
function inspectPrepared({ decoded, x402 }: Prepared, signer: string, chainId: string): ActionInspection {
  const inspection = inspectSolanaTransaction({ decoded, signer, chainId })
  if (!x402) return inspection
  return {
    ...inspection,
    transfers: inspection.transfers.map((t) => ({ ...t, to: `${chainId}:${x402.payTo}` })),
  }
}

function decodeForSigner(
  request: SignerRequest,
  address: string,
  chains: readonly string[],
  policy: SolanaPolicyOptions,
): Prepared {
  if (request.method !== solanaSignTransactionMethod) {
    throw new PayError({
      code: 'unsupported_method',
      message: `The Solana signer does not implement ${request.method}.`,
      context: { method: request.method, chainId: request.chainId },
    })
  }
  if (!chains.includes(request.chainId)) {
    throw new PayError({
      code: 'action_rejected',
      message: 'The Solana action is for a chain this signer does not serve.',
      context: { chainId: request.chainId, chains },
    })
  }
  const param = readTransactionParam(request.params)
  const decoded = decodeSolanaTransaction(param.transaction)
  checkSolanaTransaction({
    decoded,
    signer: address,
    chainId: request.chainId,
    ...(policy.allowFeePayer !== undefined && { allowFeePayer: policy.allowFeePayer }),
    ...(policy.maxFeeLamports !== undefined && { maxFeeLamports: policy.maxFeeLamports }),
    ...(policy.delegates !== undefined && { delegates: policy.delegates }),
    ...(request.subscription && { subscription: request.subscription }),
  })
  const x402 = readX402Terms(param)
  if (!x402) return { decoded }
  const problem = x402TransferProblem(decoded, address, x402)
  if (problem) {
    throw new PayError({
      code: 'action_rejected',
      message: 'The Solana transaction is not exactly the x402 payment it is signed for.',
      context: { chainId: request.chainId, account: `${request.chainId}:${address}`, reason: problem },
    })
  }
  return { decoded, x402 }
}

function fromWalletStandard(options: SolanaWalletStandardSignerOptions): {
  address: string
  chains: string[]
  signSlot: SignSlot
} {
  const feature: SolanaSignTransactionFeature = resolveSignTransactionFeature(options.feature)
  if (typeof feature?.signTransaction !== 'function') {
    throw new PayError({
      code: 'missing_signer',
      message: 'The wallet account has no solana:signTransaction feature.',
      context: { address: options.account.address },
    })
  }
  const { account } = options
  const chains = validateChains(
    options.chains ??
      account.chains.flatMap((chain) => {
        const caip2 = walletStandardChains[chain] ?? (isCaip2(chain) ? chain : undefined)
        return caip2 ? [caip2] : []
      }),
  )
  const walletChainFor = (caip2: string) =>
    account.chains.find((chain) => chain === caip2 || walletStandardChains[chain] === caip2)

  const signSlot: SignSlot = async (decoded, chainId, signal) => {
    if (!feature.supportedTransactionVersions.includes(decoded.version)) {
      throw new PayError({
        code: 'action_rejected',
        message: 'The wallet does not support this Solana transaction version.',
        context: { version: decoded.version, supported: feature.supportedTransactionVersions },
      })
    }
    const walletChain = walletChainFor(chainId)
    let outputs: readonly { signedTransaction: Uint8Array }[]
    try {
      const signing = feature.signTransaction({
        account,
        transaction: decoded.bytes.slice(),
        ...(walletChain ? { chain: walletChain } : {}),
      })
      outputs = await (signal ? abortable(signing, signal, () => signingAborted(signal)) : signing)
    } catch (error) {
      if (error instanceof PayError) throw error
      if (isUserRejection(error)) {
        throw new PayError({
          code: 'user_rejected',
          message: 'The user rejected the Solana transaction.',
          context: { chainId, account: `${chainId}:${account.address}` },
          cause: error,
        })
      }
      throw error
    }
    return signatureFromWallet(decoded, outputs[0]?.signedTransaction, account.address)
  }
  return { address: account.address, chains, signSlot }
}

/** Takes the account's signature from what the wallet returned, refusing a changed message. */
function signatureFromWallet(
  decoded: DecodedSolanaTransaction,
  signedTransaction: Uint8Array | undefined,
  address: string,
): Uint8Array {
  const invalid = (message: string) =>
    new PayError({ code: 'invalid_response', message, context: { address } })
  if (!signedTransaction) throw invalid('The wallet returned no signed Solana transaction.')
  let returned: DecodedSolanaTransaction
  try {
    returned = decodeSolanaTransaction(signedTransaction)
  } catch (cause) {
    throw new PayError({
      code: 'invalid_response',
      message: 'The wallet returned an undecodable transaction.',
      cause,
    })
  }
  // The service checks the message byte for byte; a wallet that adds priority fees or swaps the
  // blockhash would make the payment fail later, so stop here instead.
  if (!bytesEqual(returned.messageBytes, decoded.messageBytes)) {
    throw new PayError({
      code: 'action_rejected',
      message: 'The wallet changed the Solana transaction while signing.',
      context: { address },
    })
  }
  const signature = returned.signatures[decoded.signers.indexOf(address)]
  if (!signature) throw invalid('The wallet returned the Solana transaction without its signature.')
  return signature
}

function readTransactionParam(params: readonly unknown[]): { transaction: string; x402?: unknown } {
  const first = params[0]
  if (
    params.length !== 1 ||
    typeof first !== 'object' ||
    first === null ||
    typeof (first as { transaction?: unknown }).transaction !== 'string'
  ) {
    throw new PayError({
      code: 'invalid_action',
      message: 'solana_signTransaction expects params [{ transaction: <base64> }].',
    })
  }
  return first as { transaction: string; x402?: unknown }
}

function isCaip2(chain: string): boolean {
  return /^solana:[1-9A-HJ-NP-Za-km-z]{1,32}$/.test(chain)
}

export function validateChains(chains: readonly string[]): string[] {
  const bad = chains.filter((chain) => !isCaip2(chain))
  if (chains.length === 0 || bad.length > 0) {
    throw new PayError({
      code: 'invalid_caip',
      message: 'A Solana signer needs CAIP-2 chain ids of the form solana:<genesis hash prefix>.',
      context: { chains },
    })
  }
  return [...new Set(chains)]
}

function signingAborted(signal: AbortSignal): PayError {
  return new PayError({ code: 'aborted', message: 'Signing was aborted.', cause: signal.reason })
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signingAborted(signal)
}
