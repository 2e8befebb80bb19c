import type { Account, Address, Transport, WalletClient } from 'viem'
import type { ActionInspection, Signer, SignerRequest } from '../../src/actions/types.js'
import { PayError } from '../../src/errors/PayError.js'
import type { EvmAccountRef, EvmBackend, ReceiptOptions } from './backend.js'
import { eip155Account, eip155ChainId, parseEip155Account } from './caip.js'
import { assertTransactionChain, decodeEvmAction } from './decodeEvmAction.js'
import { assertDomainChain } from './decodeTypedData.js'
import { type Eip1193Provider, eip1193Backend } from './eip1193Backend.js'
import { rejected, throwIfAborted, toPayError, withAbort } from './errors.js'
import { assertEvmMethod, type EvmMethod, evmMethods } from './methods.js'
import { parsePersonalSignParams, parseTransactionParams, parseTypedDataParams } from './params.js'
import { clientsForAccount, viemBackend } from './viemBackend.js'

/** How to reach one chain: an RPC URL, or any viem transport (fallback, websocket, custom...). */
export type EvmChainConfig = { rpcUrl: string } | { transport: Transport }

export type EvmSignerOptions = ReceiptOptions &
  (
    | {
        /** A viem account, usually a LocalAccount (`privateKeyToAccount`, `mnemonicToAccount`). */
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

type Handler = (chainId: number, request: SignerRequest) => Promise<string>

/**
 * A caipay Signer for `eip155` chains. Every action is checked before anything is signed: the
 * chain must be one of the signer's, the signing address its own, and typed data or a transaction
 * that names a chain must name the action's. Failures are PayErrors; a wallet's EIP-1193 code is
 * kept in `context.rpcCode` (4001 becomes `user_rejected`).
 */
export function evmSigner(options: EvmSignerOptions): EvmSigner {
  const backend = backendFor(options)
  const handlers = createHandlers(backend, (chainId, address) =>
    assertOwnAccount(backend.accounts, chainId, address),
  )
  const accounts = [...new Set(backend.accounts.map((a) => eip155Account(a.chainId, a.address)))]
  return {
    namespace: 'eip155',
    methods: evmMethods,
    accounts: () => accounts,
    async request(request) {
      const context = { chainId: request.chainId, method: request.method }
      throwIfAborted(request.signal, context)
      assertEvmMethod(request.method)
      const chainId = eip155ChainId(request.chainId)
      try {
        return await handlers[request.method](chainId, request)
      } catch (error) {
        throw toPayError(error, context)
      }
    },
    inspect: (request) => decodeEvmAction(request),
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

function createHandlers(
  backend: EvmBackend,
  assertOwn: (chainId: number, address: Address) => void,
): Record<EvmMethod, Handler> {
  const signTypedData: Handler = async (chainId, { method, params, signal }) => {
    const { address, typedData } = parseTypedDataParams(method, params)
    assertOwn(chainId, address)
    assertDomainChain(chainId, typedData)
    return withAbort(backend.signTypedData(chainId, address, typedData), signal)
  }
  return {
    eth_signTypedData_v4: signTypedData,
    eth_signTypedData_v3: signTypedData,
    eth_signTypedData: signTypedData,
    personal_sign: async (chainId, { params, signal }) => {
      const { address, message } = parsePersonalSignParams(params)
      assertOwn(chainId, address)
      return withAbort(backend.signMessage(chainId, address, message), signal)
    },
    eth_sendTransaction: async (chainId, { params, signal, followedByMore }) => {
      const tx = parseTransactionParams(params)
      assertTransactionChain(chainId, tx.chainId)
      assertOwn(chainId, tx.from)
      const hash = await withAbort(backend.sendTransaction(chainId, tx), signal)
      if (followedByMore) await confirm(backend, chainId, hash, signal)
      return hash
    },
  }
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
    status = await withAbort(backend.waitForReceipt(chainId, txHash as `0x${string}`), signal, context)
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
