import { type Keypair, VersionedTransaction } from '@solana/web3.js'
import { createWalletClient, type Hex, http } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import type { EvmSignerPolicy } from '../../adapters/evm/evmSigner.js'
import { evmForwardParams, evmMethods, evmSignatureStatus, evmSigner } from '../../adapters/evm/index.js'
import { walletConnectSigner } from '../../adapters/walletconnect/index.js'
import { decodeEvmAction } from '../../protocol/evm/index.js'
import type { Signer } from '../../src/actions/types.js'
import type { RetryPolicy } from '../../src/client/retry.js'
import type { PaymentOption, WalletRpcAction } from '../../src/contract/gateway.js'
import { createPaymentFlow, type PaymentFlowOptions } from '../../src/flow/createPaymentFlow.js'
import { anvilChain } from '../anvil.js'
import { countingAccount } from '../countingAccount.js'
import { type HostileGateway, type Script, startHostileGateway } from './hostileGateway.js'

export const paymentId = 'pay_adversarial'
export const succeeded = { status: 'succeeded', isFinal: true, pollInMs: null, txId: 'tx' }

const signingMethods = new Set([...evmMethods, 'eth_sign', 'eth_signTransaction'])

/**
 * Anvil's own JSON-RPC, whose default accounts are unlocked: the node signs, as an injected wallet
 * would, and executes whatever fields reach it. Every signing method that reaches it is counted.
 */
function countingNode(rpcUrl: string) {
  let count = 0
  let id = 0
  const request = async ({ method, params }: { method: string; params?: unknown }) => {
    if (signingMethods.has(method)) count++
    const response = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params: params ?? [] }),
    })
    const body = (await response.json()) as { result?: unknown; error?: { code: number; message: string } }
    if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code })
    return body.result
  }
  return { request, calls: () => count }
}

export type EvmPath = 'local account' | 'WalletClient' | 'EIP-1193' | 'WalletConnect'
export const evmPaths: readonly EvmPath[] = ['local account', 'WalletClient', 'EIP-1193', 'WalletConnect']

export interface CountedSigner {
  signer: Signer
  /** Signing calls that reached the key (or the remote wallet). */
  calls: () => number
}

/**
 * The EVM signer on one of its paths, with the keys' signing calls counted. `keys` must be Anvil
 * default accounts so the EIP-1193 and WalletConnect paths (the node signs) hold the same keys. With
 * several keys, every path but the local account (one account by construction) holds them all.
 */
export function evmSignerOn(
  path: EvmPath,
  keys: Hex | readonly Hex[],
  anvil: { rpcUrl: string; chainId: number; caip2: string },
  policy: EvmSignerPolicy = {},
  /** WalletConnect only: read earlier signatures from the dapp's own node (default), or not at all. */
  readsNode = true,
): CountedSigner {
  const all = typeof keys === 'string' ? [keys] : keys
  const receipt = { pollingInterval: 50 }
  if (path === 'local account' || path === 'WalletClient') {
    const counted = (path === 'local account' ? all.slice(0, 1) : all).map((key) => countingAccount(key))
    const calls = () => counted.reduce((sum, c) => sum + c.calls(), 0)
    const signer =
      path === 'local account'
        ? evmSigner({
            account: counted[0]!.account,
            chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } },
            ...receipt,
            ...policy,
          })
        : evmSigner({
            walletClient: counted.map(({ account }) =>
              createWalletClient({
                account,
                chain: anvilChain(anvil.chainId, anvil.rpcUrl),
                transport: http(anvil.rpcUrl),
              }),
            ),
            ...receipt,
            ...policy,
          })
    return { signer, calls }
  }
  const node = countingNode(anvil.rpcUrl)
  const accounts = all.map((key) => `${anvil.caip2}:${privateKeyToAccount(key).address}`)
  if (path === 'EIP-1193') {
    return {
      signer: evmSigner({ provider: node, accounts, ...receipt, ...policy }),
      calls: node.calls,
    }
  }
  // The remote wallet of a WalletConnect session: a client whose requests reach the node's keys.
  const session = {
    topic: 't'.repeat(64),
    expiry: Math.floor(Date.now() / 1000) + 3600,
    namespaces: {
      eip155: { chains: [anvil.caip2], accounts, methods: [...evmMethods], events: [] },
    },
  }
  const client = {
    session: { get: () => session },
    request: async <T>({ request }: { request: { method: string; params: unknown } }) =>
      (await node.request(request)) as T,
  }
  return {
    signer: walletConnectSigner({
      client,
      topic: session.topic,
      namespace: 'eip155',
      inspect: (request) => decodeEvmAction(request, policy),
      forwardParams: (request) => evmForwardParams(request, policy),
      ...(readsNode && { signatureStatus: evmSignatureStatus(node, policy) }),
    }),
    calls: node.calls,
  }
}

export function rpc(chainId: string, method: string, params: unknown[]): WalletRpcAction {
  return { type: 'walletRpc', walletRpc: { chainId, method, params: JSON.stringify(params) } }
}

export function option(
  id: string,
  account: string,
  asset: string,
  value: bigint,
  actions: PaymentOption['actions'],
  decimals = 6,
): PaymentOption {
  return {
    id,
    account,
    amount: {
      unit: `caip19/${asset}`,
      value: value.toString(),
      display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals },
    },
    etaS: 5,
    expiresAt: Math.floor(Date.now() / 1000) + 600,
    actions,
  }
}

export interface Outcome {
  result?: unknown
  error?: unknown
  gateway: HostileGateway
}

/**
 * One payment against the hostile gateway: load its options, pick `optionId`, execute. Never
 * throws: the outcome says what happened.
 */
export async function payAgainst(
  script: Script,
  signers: readonly Signer[],
  optionId: string,
  flowOptions: Partial<PaymentFlowOptions> = {},
  retry?: Partial<RetryPolicy>,
): Promise<Outcome> {
  const gateway = await startHostileGateway(
    {
      status: () => ({ body: succeeded }),
      cancel: () => ({ body: { paymentId, status: 'cancelled' } }),
      ...script,
    },
    retry,
  )
  try {
    const flow = createPaymentFlow({ gateway: gateway.api, paymentId, signers, ...flowOptions })
    flow.on('error', () => {})
    const loaded = await flow.loadOptions().catch((error: unknown) => ({ error }))
    if ('error' in loaded) return { error: loaded.error, gateway }
    if (flow.state !== 'selecting') return { error: flow.result ?? new Error(`flow ${flow.state}`), gateway }
    flow.select(optionId)
    const result = await flow.execute()
    return { result, gateway }
  } catch (error) {
    return { error, gateway }
  } finally {
    await gateway.close()
  }
}

/** A Wallet Standard account on `chain` and its `solana:signTransaction` feature, holding `keypair`. */
export function walletStandardWallet(keypair: Keypair, chain: string) {
  return {
    account: {
      address: keypair.publicKey.toBase58(),
      publicKey: keypair.publicKey.toBytes(),
      chains: [chain],
      features: ['solana:signTransaction'],
    },
    feature: {
      version: '1.0.0' as const,
      supportedTransactionVersions: ['legacy', 0] as const,
      async signTransaction(...inputs: readonly { transaction: Uint8Array }[]) {
        return inputs.map(({ transaction }) => {
          const tx = VersionedTransaction.deserialize(transaction)
          tx.sign([keypair])
          return { signedTransaction: tx.serialize() }
        })
      },
    },
  }
}

/** A WalletConnect session whose remote wallet holds `keypair` on `chain` (web3.js signs). */
export function solanaWalletConnectSession(keypair: Keypair, chain: string) {
  const session = {
    topic: 's'.repeat(64),
    expiry: Math.floor(Date.now() / 1000) + 3600,
    namespaces: {
      solana: {
        chains: [chain],
        accounts: [`${chain}:${keypair.publicKey.toBase58()}`],
        methods: ['solana_signTransaction'],
        events: [],
      },
    },
  }
  const client = {
    session: { get: () => session },
    async request<T>({ request }: { request: { params: unknown } }): Promise<T> {
      const tx = VersionedTransaction.deserialize(
        Buffer.from((request.params as { transaction: string }).transaction, 'base64'),
      )
      tx.sign([keypair])
      return { transaction: Buffer.from(tx.serialize()).toString('base64') } as T
    },
  }
  return { client, topic: session.topic }
}
