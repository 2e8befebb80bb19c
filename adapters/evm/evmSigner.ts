import type { Account, Address, Transport, WalletClient } from 'viem'
import {
  type DecodedEvmAction,
  decodeEvmAction,
  decodeEvmRequest,
  type EvmDecodePolicy,
  eip155Account,
  evmMethods,
  parseEip155Account,
} from '../../protocol/evm/index.js'
import type { ActionInspection, Signer, SignerRequest } from '../../src/actions/types.js'
import { PayError } from '../../src/errors/PayError.js'
import { readAssetInfo } from './assetInfo.js'
import type { EvmAccountRef, EvmBackend, ReceiptOptions } from './backend.js'
import { type Eip1193Provider, eip1193Backend } from './eip1193Backend.js'
import { rejected, throwIfAborted, toPayError, withAbort } from './errors.js'
import { evmMandateStatus, permit2RevokeCall } from './mandates.js'
import { evmSignatureStatus } from './signatureStatus.js'
import { clientsForAccount, viemBackend } from './viemBackend.js'

/** How to reach one chain: an RPC URL, or any viem transport (fallback, websocket, custom...). */
export type EvmChainConfig = { rpcUrl: string } | { transport: Transport }

/** What `onSignMessage` is shown: readable text only (anything else never reaches it). */
export interface SignMessageRequest {
  /** CAIP-10 account asked to sign. */
  account: string
  text: string
}

export interface EvmSignerPolicy extends EvmDecodePolicy {
  /**
   * Called before a `personal_sign` of readable text (such as a test-mode attestation) is signed,
   * so the wallet can show it; false refuses it as `user_rejected`. Default: readable text is signed.
   * A 32-byte or non-UTF-8 payload is refused before this hook, whatever it would answer.
   */
  onSignMessage?: (request: SignMessageRequest) => boolean | Promise<boolean>
}

export type EvmSignerOptions = ReceiptOptions &
  EvmSignerPolicy &
  (
    | {
        /**
         * A viem account: a LocalAccount (`privateKeyToAccount`, `mnemonicToAccount`, an EIP-7702
         * delegated key), or a smart account (`toCoinbaseSmartAccount`, a `toSafeSmartAccount`-style
         * account). A smart account is advertised by its own address and signs typed data as itself:
         * ERC-1271 once deployed, ERC-6492 before; the guard decodes the payload before that wrapper is
         * applied. It cannot send the plain transactions an option may hold (a Permit2 approve).
         */
        account: Account
        /** Chains the account pays on, keyed by CAIP-2 id (`eip155:8453`). */
        chains: Readonly<Record<string, EvmChainConfig>>
      }
    | {
        /** WalletClients with an account and a chain; several for several chains. */
        walletClient: WalletClient | readonly WalletClient[]
      }
    | {
        provider: Eip1193Provider
        /** CAIP-10 accounts the provider holds keys for, e.g. from `eth_requestAccounts` per chain. */
        accounts: readonly string[]
      }
  )

export interface EvmSigner extends Signer {
  readonly namespace: 'eip155'
  readonly methods: typeof evmMethods
  inspect(request: SignerRequest): ActionInspection
}

/**
 * A caipay Signer for `eip155` chains. Every request is decoded by the shared EVM protocol module
 * before anything is signed, and only the decoded payload is forwarded: typed data rebuilt from its
 * known struct, a transaction holding just `from`, `to`, `data`, `value` (gas, fees and nonce are
 * the wallet's or viem's to fill), readable `personal_sign` text. The chain must be one of the
 * signer's and the signing address its own. Failures are PayErrors; a wallet's EIP-1193 code is
 * kept in `context.rpcCode` (4001 becomes `user_rejected`).
 */
export function evmSigner(options: EvmSignerOptions): EvmSigner {
  const backend = backendFor(options)
  const accounts = [...new Set(backend.accounts.map((a) => eip155Account(a.chainId, a.address)))]
  return {
    namespace: 'eip155',
    methods: evmMethods,
    accounts: () => accounts,
    async request(request) {
      const context = { chainId: request.chainId, method: request.method }
      throwIfAborted(request.signal, context)
      const decoded = decodeEvmRequest(request, options)
      try {
        return await execute(backend, options, decoded, request)
      } catch (error) {
        throw toPayError(error, context)
      }
    },
    inspect: (request) => decodeEvmAction(request, options),
    signatureStatus: evmSignatureStatus((chainId) => backend.node(chainId), options),
    mandateStatus: evmMandateStatus((chainId) => backend.node(chainId), options),
    async revokeMandate(mandate, { signal } = {}) {
      // Built from the decoded mandate alone: the owner's own key zeroes the allowance it granted.
      const { from, to, data, chainId } = permit2RevokeCall(mandate)
      const context = { chainId: `eip155:${chainId}`, method: 'revokeMandate' }
      assertOwnAccount(backend.accounts, chainId, from)
      try {
        const hash = await withAbort(backend.sendTransaction(chainId, { from, to, data }), signal)
        await confirm(backend, chainId, hash, signal)
        return hash
      } catch (error) {
        throw toPayError(error, context)
      }
    },
    describeAsset: (asset) =>
      readAssetInfo(
        asset,
        (chainId) => backend.node(chainId),
        backend.accounts.map((a) => a.chainId),
      ),
  }
}

async function execute(
  backend: EvmBackend,
  policy: EvmSignerPolicy,
  { chainId, signable }: DecodedEvmAction,
  { signal, followedByMore }: SignerRequest,
): Promise<string> {
  switch (signable.kind) {
    case 'typedData':
      assertOwnAccount(backend.accounts, chainId, signable.address)
      return withAbort(backend.signTypedData(chainId, signable.address, signable.typedData), signal)
    case 'message': {
      assertOwnAccount(backend.accounts, chainId, signable.address)
      const account = eip155Account(chainId, signable.address)
      if (policy.onSignMessage && !(await policy.onSignMessage({ account, text: signable.text }))) {
        throw new PayError({
          code: 'user_rejected',
          message: 'The wallet declined to sign the message.',
          context: { chainId: `eip155:${chainId}`, account },
        })
      }
      return withAbort(backend.signMessage(chainId, signable.address, signable.message), signal)
    }
    case 'transaction': {
      assertOwnAccount(backend.accounts, chainId, signable.tx.from)
      const hash = await withAbort(backend.sendTransaction(chainId, signable.tx), signal)
      if (followedByMore) await confirm(backend, chainId, hash, signal)
      return hash
    }
  }
}

function backendFor(options: EvmSignerOptions): EvmBackend {
  const backend =
    'provider' in options
      ? eip1193Backend(options.provider, options.accounts.map(parseEip155Account), options)
      : 'walletClient' in options
        ? viemBackend(
            Array.isArray(options.walletClient)
              ? options.walletClient
              : [options.walletClient as WalletClient],
            options,
          )
        : viemBackend(clientsForAccount(options.account, options.chains), options)
  if (backend.accounts.length === 0) {
    throw new PayError({ code: 'missing_signer', message: 'evmSigner was given no chains or accounts.' })
  }
  return backend
}

/**
 * Waits for the receipt so later actions see the transaction's effects. Every failure here carries
 * `txHash`: the transaction is already out, and a caller that loses its hash may pay twice.
 */
async function confirm(
  backend: EvmBackend,
  chainId: number,
  txHash: string,
  signal?: AbortSignal,
): Promise<void> {
  const context = { chainId: `eip155:${chainId}`, txHash }
  let status: 'success' | 'reverted'
  try {
    status = await withAbort(
      backend.waitForReceipt(chainId, txHash as `0x${string}`, signal),
      signal,
      context,
    )
  } catch (error) {
    throw toPayError(error, context)
  }
  if (status === 'reverted') {
    throw new PayError({
      code: 'action_rejected',
      message: 'The transaction was mined but reverted.',
      context,
    })
  }
}

function assertOwnAccount(accounts: readonly EvmAccountRef[], chainId: number, address: Address): void {
  const onChain = accounts.filter((a) => a.chainId === chainId)
  if (onChain.length === 0) {
    throw rejected('The signer has no account on the action chain.', { chainId: `eip155:${chainId}` })
  }
  if (!onChain.some((a) => a.address.toLowerCase() === address.toLowerCase())) {
    throw rejected('The action asks another address to sign.', { chainId: `eip155:${chainId}`, address })
  }
}
