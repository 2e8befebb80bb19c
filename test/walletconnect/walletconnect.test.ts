import { createTransferCheckedInstruction, getAssociatedTokenAddressSync } from '@solana/spl-token'
import { Keypair, PublicKey, Transaction, VersionedTransaction } from '@solana/web3.js'
import bs58 from 'bs58'
import { custom, type Hex, toHex, verifyMessage, verifyTypedData } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { decodeEvmAction, evmForwardParams, evmSigner } from '../../adapters/evm/index.js'
import { solanaInspector, solanaSigner } from '../../adapters/solana/index.js'
import {
  type WalletConnectSigner,
  walletConnectSigner,
  walletConnectSigners,
} from '../../adapters/walletconnect/index.js'
import { expectPayError } from '../expectPayError.js'
import {
  closeTestClient,
  connectSession,
  createTestClient,
  guardNetwork,
  type NetworkGuard,
  respondAsWallet,
  type Session,
  type TestSignClient,
} from './clients.js'
import { type Relay, startRelay } from './relay.js'

// Two real sign-client instances talk through the local relay: the dapp side is caipay's
// WalletConnect signer, the wallet side answers with caipay's own EVM and Solana signers.

const ethereum = 'eip155:1'
const base = 'eip155:8453'
const solanaMainnet = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const usdcMint = new PublicKey('EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v')
const evmMethods = ['eth_signTypedData_v4', 'personal_sign', 'eth_sendTransaction']

const evmAccount = privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d')
const buyer = Keypair.generate()
const service = Keypair.generate()

let relay: Relay
let network: NetworkGuard
let dapp: TestSignClient
let wallet: TestSignClient
let session: Session
let responder: ReturnType<typeof respondAsWallet>
let evm: WalletConnectSigner
let solana: WalletConnectSigner

beforeAll(async () => {
  network = guardNetwork()
  relay = await startRelay()
  ;[dapp, wallet] = await Promise.all([
    createTestClient(relay.url, 'dapp'),
    createTestClient(relay.url, 'wallet'),
  ])
  responder = respondAsWallet(wallet, walletHandler())
  session = await connectSession(
    dapp,
    wallet,
    {
      eip155: { chains: [ethereum, base], methods: evmMethods, events: ['accountsChanged', 'chainChanged'] },
      solana: { chains: [solanaMainnet], methods: ['solana_signTransaction'], events: [] },
    },
    {
      eip155: {
        chains: [ethereum, base],
        accounts: [`${ethereum}:${evmAccount.address}`, `${base}:${evmAccount.address}`],
        methods: evmMethods,
        events: ['accountsChanged', 'chainChanged'],
      },
      solana: {
        chains: [solanaMainnet],
        accounts: [`${solanaMainnet}:${buyer.publicKey.toBase58()}`],
        methods: ['solana_signTransaction'],
        events: [],
      },
    },
  )
  ;[evm, solana] = walletConnectSigners(dapp, session, {
    inspect: {
      eip155: decodeEvmAction,
      solana: solanaInspector({ address: buyer.publicKey.toBase58(), chains: [solanaMainnet] }),
    },
    forwardParams: { eip155: evmForwardParams },
  }) as [WalletConnectSigner, WalletConnectSigner]
})

afterAll(async () => {
  await Promise.all([dapp && closeTestClient(dapp), wallet && closeTestClient(wallet)])
  await relay?.stop()
  network?.restore()
})

/** The wallet: caipay's EVM signer on a local key (no RPC needed to sign) and its Solana signer. */
function walletHandler() {
  const noRpc = custom({
    request: async () => {
      throw new Error('the wallet side of this test has no RPC')
    },
  })
  const evmWallet = evmSigner({
    account: evmAccount,
    chains: { [ethereum]: { transport: noRpc }, [base]: { transport: noRpc } },
  })
  const solanaWallet = solanaSigner({ keypair: buyer, chains: [solanaMainnet] })
  return async ({ chainId, method, params }: { chainId: string; method: string; params: unknown }) => {
    if (chainId.startsWith('eip155:')) {
      return { result: await evmWallet.request({ chainId, method, params: params as unknown[] }) }
    }
    // WalletConnect's Solana RPC carries `{ transaction }`; caipay's signer takes `[{ transaction }]`.
    const transaction = await solanaWallet.request({ chainId, method, params: [params] })
    return { result: { signature: buyerSignature(transaction), transaction } }
  }
}

function buyerSignature(base64: string): string {
  const tx = VersionedTransaction.deserialize(Buffer.from(base64, 'base64'))
  const index = tx.message.staticAccountKeys.findIndex((key) => key.equals(buyer.publicKey))
  return bs58.encode(tx.signatures[index]!)
}

function paymentTransaction(): Transaction {
  const tx = new Transaction({
    feePayer: service.publicKey,
    recentBlockhash: Keypair.generate().publicKey.toBase58(),
  })
  tx.add(
    createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(usdcMint, buyer.publicKey),
      usdcMint,
      getAssociatedTokenAddressSync(usdcMint, service.publicKey),
      buyer.publicKey,
      1_500_000n,
      6,
    ),
  )
  return tx
}

const transferWithAuthorization = {
  domain: {
    name: 'USD Coin',
    version: '2',
    chainId: 8453,
    verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  },
  types: {
    TransferWithAuthorization: [
      { name: 'from', type: 'address' },
      { name: 'to', type: 'address' },
      { name: 'value', type: 'uint256' },
      { name: 'validAfter', type: 'uint256' },
      { name: 'validBefore', type: 'uint256' },
      { name: 'nonce', type: 'bytes32' },
    ],
  },
  primaryType: 'TransferWithAuthorization',
  message: {
    from: evmAccount.address,
    to: '0x000000000000000000000000000000000000dEaD',
    value: 1_500_000n,
    validAfter: 0n,
    validBefore: 4_102_444_800n,
    nonce: `0x${'ab'.repeat(32)}`,
  },
} as const

/** Typed data as a dapp sends it: JSON, uint256 values as decimal strings. */
const typedDataJson = JSON.stringify(transferWithAuthorization, (_, value) =>
  typeof value === 'bigint' ? value.toString() : value,
)

describe('WalletConnect signer over a local relay', () => {
  it('builds one signer per approved namespace with the approved accounts and methods', () => {
    expect(evm.namespace).toBe('eip155')
    expect(evm.accounts()).toEqual([`${ethereum}:${evmAccount.address}`, `${base}:${evmAccount.address}`])
    expect(evm.methods).toEqual(evmMethods)
    expect(evm.chains()).toEqual([ethereum, base])
    expect(solana.namespace).toBe('solana')
    expect(solana.accounts()).toEqual([`${solanaMainnet}:${buyer.publicKey.toBase58()}`])
    expect(solana.methods).toEqual(['solana_signTransaction'])
  })

  it('forwards eth_signTypedData_v4 and returns a signature that verifies', async () => {
    const signature = await evm.request({
      chainId: base,
      method: 'eth_signTypedData_v4',
      params: [evmAccount.address, typedDataJson],
    })
    expect(
      await verifyTypedData({
        address: evmAccount.address,
        ...transferWithAuthorization,
        signature: signature as Hex,
      }),
    ).toBe(true)
  })

  it('lets the signing guard decode EVM actions with the plugged-in decoder', async () => {
    const inspection = await evm.inspect?.({
      chainId: base,
      method: 'eth_signTypedData_v4',
      params: [evmAccount.address, typedDataJson],
    })
    expect(inspection?.account).toBe(`${base}:${evmAccount.address}`)
    expect(inspection?.transfers).toMatchObject([
      { asset: `${base}/erc20:${transferWithAuthorization.domain.verifyingContract}`, amount: 1_500_000n },
    ])
    const tx = paymentTransaction()
    const unsigned = tx.serialize({ requireAllSignatures: false, verifySignatures: false }).toString('base64')
    const solanaInspection = await solana.inspect?.({
      chainId: solanaMainnet,
      method: 'solana_signTransaction',
      params: [{ transaction: unsigned }],
    })
    expect(solanaInspection?.account).toBe(`${solanaMainnet}:${buyer.publicKey.toBase58()}`)
  })

  it('forwards personal_sign and returns a signature that verifies', async () => {
    // Not 32 bytes: a 32-byte message could be a hash, and is never signed.
    const message = toHex('caipay: I authorise this payment.')
    const signature = await evm.request({
      chainId: ethereum,
      method: 'personal_sign',
      params: [message, evmAccount.address],
    })
    expect(
      await verifyMessage({
        address: evmAccount.address,
        message: { raw: message },
        signature: signature as Hex,
      }),
    ).toBe(true)
  })

  it('forwards solana_signTransaction and returns the complete signed transaction', async () => {
    const tx = paymentTransaction()
    const unsigned = tx.serialize({ requireAllSignatures: false, verifySignatures: false }).toString('base64')
    const result = await solana.request({
      chainId: solanaMainnet,
      method: 'solana_signTransaction',
      params: [{ transaction: unsigned }],
    })
    // WalletConnect's wire format is the object, not caipay's one-element array.
    expect(responder.seen.at(-1)?.params).toEqual({ transaction: unsigned })

    const signed = Transaction.from(Buffer.from(result, 'base64'))
    expect(signed.serializeMessage().equals(tx.serializeMessage())).toBe(true)
    const buyerSlot = signed.signatures.find((s) => s.publicKey.equals(buyer.publicKey))
    const serviceSlot = signed.signatures.find((s) => s.publicKey.equals(service.publicKey))
    expect(buyerSlot?.signature).not.toBeNull()
    expect(serviceSlot?.signature).toBeNull()
    expect(signed.verifySignatures(false)).toBe(true)
  })

  it('refuses a wallet answer that carries only a detached Solana signature', async () => {
    responder.answerNext(async () => ({ result: { signature: bs58.encode(new Uint8Array(64).fill(7)) } }))
    const tx = paymentTransaction().serialize({ requireAllSignatures: false, verifySignatures: false })
    const error = await expectPayError(
      solana.request({
        chainId: solanaMainnet,
        method: 'solana_signTransaction',
        params: [{ transaction: tx.toString('base64') }],
      }),
    )
    expect(error.code).toBe('action_rejected')
    expect(error.shortMessage).toMatch(/detached signature/)
  })

  it.each([
    [4001, 'User rejected the request.'],
    // What sign-client's getSdkError('USER_REJECTED') produces.
    [5000, 'User rejected.'],
  ])('maps a wallet rejection with code %i to user_rejected', async (code, message) => {
    responder.answerNext(async () => ({ error: { code, message } }))
    const error = await expectPayError(
      evm.request({ chainId: ethereum, method: 'personal_sign', params: [toHex('hi'), evmAccount.address] }),
    )
    expect(error.code).toBe('user_rejected')
    expect(error.context).toMatchObject({ rpcCode: code, chainId: ethereum, method: 'personal_sign' })
  })

  it('maps another wallet error to action_rejected with its code and message', async () => {
    responder.answerNext(async () => ({ error: { code: -32000, message: 'insufficient funds for gas' } }))
    const error = await expectPayError(
      evm.request({ chainId: ethereum, method: 'personal_sign', params: [toHex('hi'), evmAccount.address] }),
    )
    expect(error.code).toBe('action_rejected')
    expect(error.context.rpcCode).toBe(-32000)
    expect(error.details).toBe('insufficient funds for gas')
  })

  it('rejects a chain or method the session did not approve without sending anything', async () => {
    const publishes = () => relay.requests.filter((r) => r.method === 'irn_publish').length
    const before = publishes()
    const seenBefore = responder.seen.length
    const chain = await expectPayError(
      evm.request({
        chainId: 'eip155:10',
        method: 'personal_sign',
        params: [toHex('hi'), evmAccount.address],
      }),
    )
    expect(chain.code).toBe('action_rejected')
    expect(chain.context.approvedChains).toEqual([ethereum, base])
    const method = await expectPayError(
      evm.request({ chainId: ethereum, method: 'eth_sign', params: [evmAccount.address, toHex('hi')] }),
    )
    expect(method.code).toBe('unsupported_method')
    expect(publishes()).toBe(before)
    expect(responder.seen.length).toBe(seenBefore)
  })

  it('stops waiting when the signal aborts, and the late answer is dropped', async () => {
    let release!: () => void
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    responder.answerNext(async () => {
      await held
      return { error: { code: 4001, message: 'too late' } }
    })
    const controller = new AbortController()
    const seenBefore = responder.seen.length
    const pending = evm.request({
      chainId: ethereum,
      method: 'personal_sign',
      params: [toHex('hi'), evmAccount.address],
      signal: controller.signal,
    })
    await waitFor(() => responder.seen.length > seenBefore)
    controller.abort()
    const error = await expectPayError(pending)
    expect(error.code).toBe('aborted')
    release()
  })

  it('a signer built from the topic sees the same session', () => {
    const byTopic = walletConnectSigner({ client: dapp, topic: session.topic, namespace: 'solana' })
    expect(byTopic.accounts()).toEqual(solana.accounts())
  })

  it('spoke only WalletConnect relay methods, and only to 127.0.0.1', () => {
    const methods = new Set(relay.requests.map((r) => r.method))
    expect(methods).toContain('wc_proposeSession')
    expect(methods).toContain('wc_approveSession')
    expect(methods).toContain('irn_subscribe')
    expect(methods).toContain('irn_publish')
    expect(network.external).toEqual([])
  })
})

async function waitFor(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
