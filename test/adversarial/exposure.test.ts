import { createPrivateKey, sign } from 'node:crypto'
import {
  createAssociatedTokenAccountIdempotent,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import {
  Connection,
  Keypair,
  type PublicKey,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import {
  type Address,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  toHex,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import {
  afterAll,
  afterEach,
  beforeAll,
  beforeEach,
  describe,
  expect,
  it,
  type MockInstance,
  vi,
} from 'vitest'
import { solanaInspector, solanaSignatureStatus, solanaSigner } from '../../adapters/solana/index.js'
import { walletConnectSigner } from '../../adapters/walletconnect/index.js'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import { permitFields } from '../../protocol/evm/decodeTypedData.js'
import type { Signer } from '../../src/actions/types.js'
import {
  type AnvilInstance,
  anvilChain,
  anvilPrivateKeys,
  authorizationTypedData,
  deployTestToken,
  mintTestToken,
  startAnvil,
} from '../anvil.js'
import {
  airdrop,
  createTestMint,
  type LiteSvmRpc,
  mintTestTokens,
  solanaCaip2,
  startLiteSvmRpc,
  tokenBalance,
} from '../solana/index.js'
import { gatewayError, type Script } from './hostileGateway.js'
import {
  type EvmPath,
  evmPaths,
  evmSignerOn,
  option,
  payAgainst,
  rpc,
  solanaWalletConnectSession,
  succeeded,
  walletStandardWallet,
} from './support.js'

// Issue 27, cause 4: "can no longer execute" is not "did not execute". A hostile gateway executes
// what the wallet signed before it expires, then answers quote_expired; the flow must not sign a
// second round (the key is asked once, the payer pays once). Only a signature the wallet's own node
// proves unused and unusable lets a rebuild be signed. Real chains: Anvil and LiteSVM.

const build = { type: 'build' as const, build: { data: 'opaque' } }
const value = 1_000_000n
const quoteExpired = () => gatewayError(422, 'quote_expired')
/** The gateway's status answer until the test says the payment is paid. */
const processing = { body: { status: 'processing', isFinal: false, pollInMs: 10 } }
const poll = { poll: { intervalMs: 10, deadlineMs: 2_000 } }

/** An Ed25519 signature by a Solana keypair, with node:crypto. */
function ed25519Sign(keypair: Keypair, message: Uint8Array): Uint8Array {
  const pkcs8 = Buffer.concat([
    Buffer.from('302e020100300506032b657004220420', 'hex'),
    keypair.secretKey.slice(0, 32),
  ])
  return sign(null, message, createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }))
}

describe('EVM (Anvil): EIP-3009 and EIP-2612 signatures across quote_expired', () => {
  const payerKey = anvilPrivateKeys[1]
  const payer = privateKeyToAccount(payerKey).address
  const merchant = privateKeyToAccount(anvilPrivateKeys[2]).address
  const relayer = privateKeyToAccount(anvilPrivateKeys[3])
  let anvil: AnvilInstance
  let token: Address
  let reader: PublicClient
  let asset: string
  let account: string

  beforeAll(async () => {
    anvil = await startAnvil()
    token = await deployTestToken(anvil.rpcUrl)
    await mintTestToken(anvil.rpcUrl, token, payer, 100_000_000n)
    reader = createPublicClient({
      chain: anvilChain(anvil.chainId, anvil.rpcUrl),
      transport: http(anvil.rpcUrl),
    })
    asset = `${anvil.caip2}/erc20:${token}`
    account = `${anvil.caip2}:${payer}`
  })
  afterAll(() => anvil?.stop())

  const relayerClient = () =>
    createWalletClient({
      account: relayer,
      chain: anvilChain(anvil.chainId, anvil.rpcUrl),
      transport: http(anvil.rpcUrl),
    })
  const nodeTime = async () => (await reader.getBlock()).timestamp
  /** Moves the node's clock past `seconds` from now and mines a block there. */
  const passTime = async (seconds: number) => {
    await reader.request({ method: 'evm_increaseTime', params: [toHex(seconds)] } as never)
    await reader.request({ method: 'evm_mine', params: [] } as never)
  }
  // Each case starts with the node's clock on the wall clock, so a deadline set from one holds for the other.
  afterEach(async () => {
    await reader.request({ method: 'evm_setTime', params: [toHex(Math.floor(Date.now() / 1000))] } as never)
    await reader.request({ method: 'evm_mine', params: [] } as never)
  })
  const balance = () =>
    reader.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [payer] })
  const mined = async (hash: Hex) => {
    const receipt = await reader.waitForTransactionReceipt({ hash, pollingInterval: 20 })
    expect(receipt.status).toBe('success')
  }

  async function authorizationAction(lifetime = 30n) {
    const typed = authorizationTypedData({
      token,
      chainId: anvil.chainId,
      from: payer,
      to: merchant,
      value,
      validBefore: (await nodeTime()) + lifetime,
    })
    return { typed, action: rpc(anvil.caip2, 'eth_signTypedData_v4', [payer, JSON.stringify(typed)]) }
  }

  async function permitAction() {
    const nonce = await reader.readContract({
      address: token,
      abi: testUsdcAbi,
      functionName: 'nonces',
      args: [payer],
    })
    const typed = {
      types: { Permit: permitFields },
      primaryType: 'Permit',
      domain: { name: 'USD Coin', version: '2', chainId: anvil.chainId, verifyingContract: token },
      message: {
        owner: payer,
        spender: relayer.address,
        value: value.toString(),
        nonce: (nonce as bigint).toString(),
        deadline: ((await nodeTime()) + 30n).toString(),
      },
    }
    return { typed, action: rpc(anvil.caip2, 'eth_signTypedData_v4', [payer, JSON.stringify(typed)]) }
  }

  /**
   * One payment of `value` built by the gateway: `relay` acts on the first round's signature before
   * the gateway answers quote_expired; later confirms succeed.
   */
  async function payThrough(
    signer: Signer,
    round: () => Promise<{ action: ReturnType<typeof rpc> }>,
    relay: (signature: Hex) => Promise<void>,
  ) {
    let paid = false
    const script: Script = {
      options: () => ({ body: { options: [option('opt_1', account, asset, value, [build])] } }),
      fetch: async () => ({ body: { actions: [(await round()).action] } }),
      confirm: async (body, n) => {
        if (n > 1) return { body: succeeded }
        await relay((body as { results: Hex[] }).results[0]!)
        paid = true
        return quoteExpired()
      },
      // An honest ledger would now show the payment paid; this gateway says so only once it relayed.
      status: () => (paid ? { body: succeeded } : processing),
    }
    return payAgainst(script, [signer], 'opt_1', poll)
  }

  /**
   * Relays the authorization at once, then waits in real time until its `validBefore` passed on the
   * wall clock and on the node alike: "can no longer execute", though it did.
   */
  const relayAuthorization = (typed: { message: Record<string, string> }) => async (signature: Hex) => {
    const m = typed.message
    const hash = await relayerClient().writeContract({
      address: token,
      abi: testUsdcAbi,
      functionName: 'transferWithAuthorization',
      args: [m.from, m.to, BigInt(m.value), BigInt(m.validAfter), BigInt(m.validBefore), m.nonce, signature],
    } as never)
    await mined(hash)
    const until = Number(m.validBefore) * 1000 + 100
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until - Date.now())))
    await reader.request({ method: 'evm_setTime', params: [toHex(Math.floor(Date.now() / 1000))] } as never)
    await reader.request({ method: 'evm_mine', params: [] } as never)
  }

  describe.each(evmPaths)('EVM signer via %s', (path: EvmPath) => {
    it('EIP-3009 executed before its validBefore, then quote_expired: no second authorization, paid once', async () => {
      const counted = evmSignerOn(path, payerKey, anvil)
      const before = await balance()
      let first: Awaited<ReturnType<typeof authorizationAction>> | undefined
      const round = async () => {
        const next = await authorizationAction(2n)
        first ??= next
        return next
      }
      const { result, error, gateway } = await payThrough(counted.signer, round, (signature) =>
        relayAuthorization(first!.typed)(signature),
      )
      expect(error).toBeUndefined()
      expect(result).toMatchObject({ status: 'succeeded' })
      expect(counted.calls()).toBe(1)
      expect(gateway.calls.fetch).toHaveLength(1)
      expect(before - (await balance())).toBe(value)
    })

    it('control: an authorization the node proves unused once validBefore passed lets the rebuild be signed', async () => {
      const counted = evmSignerOn(path, payerKey, anvil)
      const { result } = await payThrough(counted.signer, authorizationAction, () => passTime(60))
      expect(result).toMatchObject({ status: 'succeeded' })
      expect(counted.calls()).toBe(2)
    })

    it('EIP-2612: a permit used before its deadline leaves an allowance that outlives it: nothing more is signed', async () => {
      // The relayer is a spender this wallet allow-lists (the guard signs no permit to any other).
      const counted = evmSignerOn(path, payerKey, anvil, { spenders: [`${anvil.caip2}:${relayer.address}`] })
      let first: Awaited<ReturnType<typeof permitAction>> | undefined
      const round = async () => {
        const next = await permitAction()
        first ??= next
        return next
      }
      const { result, gateway } = await payThrough(counted.signer, round, async (signature) => {
        const m = first!.typed.message
        const hash = await relayerClient().writeContract({
          address: token,
          abi: testUsdcAbi,
          functionName: 'permit',
          args: [m.owner, m.spender, BigInt(m.value), BigInt(m.deadline), signature],
        } as never)
        await mined(hash)
        await passTime(60)
      })
      expect(result).toMatchObject({ status: 'succeeded' })
      expect(counted.calls()).toBe(1)
      expect(gateway.calls.fetch).toHaveLength(1)
      const allowance = await reader.readContract({
        address: token,
        abi: erc20Abi,
        functionName: 'allowance',
        args: [payer, relayer.address],
      })
      // The allowance the permit set is still there to draw, long after the deadline.
      expect(allowance).toBe(value)
    })
  })

  it('WalletConnect without a node to read: an expired authorization still counts, no rebuild is signed', async () => {
    const counted = evmSignerOn('WalletConnect', payerKey, anvil, {}, false)
    const { error } = await payThrough(counted.signer, authorizationAction, () => passTime(60))
    expect(error).toMatchObject({ code: 'quote_expired' })
    expect(counted.calls()).toBe(1)
  })
})

describe('Solana (LiteSVM): a transfer that landed, then a blockhash that expired', () => {
  let svm: LiteSvmRpc
  let connection: Connection
  let chain: string
  let mint: PublicKey
  const buyer = Keypair.generate()
  const service = Keypair.generate()
  const merchant = Keypair.generate().publicKey
  let signCalls: MockInstance

  beforeAll(async () => {
    svm = await startLiteSvmRpc()
    connection = new Connection(svm.rpcUrl, 'confirmed')
    chain = solanaCaip2(svm.genesisHash)
    await airdrop(connection, buyer.publicKey)
    await airdrop(connection, service.publicKey)
    mint = await createTestMint(connection, service)
    await mintTestTokens(connection, service, mint, buyer.publicKey, 100_000_000n)
    await createAssociatedTokenAccountIdempotent(connection, service, mint, merchant)
  })
  afterAll(() => svm?.stop())
  beforeEach(() => {
    signCalls = vi.spyOn(VersionedTransaction.prototype, 'sign')
  })
  afterEach(() => signCalls.mockRestore())

  type SolanaPath = 'Keypair' | 'Wallet Standard' | 'WalletConnect'
  const address = buyer.publicKey.toBase58()

  function signerOn(path: SolanaPath): Signer {
    if (path === 'Keypair')
      return solanaSigner({ keypair: buyer, chains: [chain], connection, allowFeePayer: true })
    if (path === 'Wallet Standard') {
      return solanaSigner({
        ...walletStandardWallet(buyer, chain),
        chains: [chain],
        connection,
        allowFeePayer: true,
      })
    }
    return walletConnectSigner({
      ...solanaWalletConnectSession(buyer, chain),
      namespace: 'solana',
      inspect: solanaInspector({ address, chains: [chain], allowFeePayer: true }),
      signatureStatus: solanaSignatureStatus(connection, address),
    })
  }

  /** A transfer of `value` to the merchant on the node's current blockhash; `feePayer` signs first. */
  async function transfer(feePayer: 'wallet' | 'service') {
    const ix = createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(mint, buyer.publicKey),
      mint,
      getAssociatedTokenAddressSync(mint, merchant),
      buyer.publicKey,
      value,
      6,
      [],
      TOKEN_PROGRAM_ID,
    )
    const { blockhash } = await connection.getLatestBlockhash()
    const message = new TransactionMessage({
      payerKey: feePayer === 'wallet' ? buyer.publicKey : service.publicKey,
      recentBlockhash: blockhash,
      instructions: [ix],
    }).compileToLegacyMessage()
    const tx = new VersionedTransaction(message)
    // The service signs as fee payer before the wallet, as the reference server does (outside
    // web3.js's sign, which counts the wallet's signing calls).
    if (feePayer === 'service') tx.addSignature(service.publicKey, ed25519Sign(service, message.serialize()))
    return Buffer.from(tx.serialize()).toString('base64')
  }

  function payThrough(signer: Signer, feePayer: 'wallet' | 'service', land: boolean) {
    let paid = false
    const script: Script = {
      options: () => ({
        body: {
          options: [
            option('opt_sol', `${chain}:${address}`, `${chain}/token:${mint.toBase58()}`, value, [build]),
          ],
        },
      }),
      fetch: async () => ({
        body: {
          actions: [rpc(chain, 'solana_signTransaction', [{ transaction: await transfer(feePayer) }])],
        },
      }),
      confirm: async (body, n) => {
        if (n > 1) return { body: succeeded }
        if (land) {
          const signed = Buffer.from((body as { results: string[] }).results[0]!, 'base64')
          const signature = await connection.sendRawTransaction(signed, { skipPreflight: true })
          const status = (await connection.getSignatureStatus(signature)).value
          expect(status?.err ?? null).toBeNull()
          paid = true
        }
        svm.expireBlockhash()
        return quoteExpired()
      },
      status: () => (paid ? { body: succeeded } : processing),
    }
    return payAgainst(script, [signer], 'opt_sol', poll)
  }

  describe.each(['Keypair', 'Wallet Standard', 'WalletConnect'] as const)('Solana signer via %s', (path) => {
    it('the wallet’s transfer landed, then its blockhash expired: nothing more is signed, paid once', async () => {
      const before = await tokenBalance(connection, buyer.publicKey, mint)
      const { result, error, gateway } = await payThrough(signerOn(path), 'wallet', true)
      expect(error).toBeUndefined()
      expect(result).toMatchObject({ status: 'succeeded' })
      expect(signCalls).toHaveBeenCalledTimes(1)
      expect(gateway.calls.fetch).toHaveLength(1)
      expect(before - (await tokenBalance(connection, buyer.publicKey, mint))).toBe(value)
    })

    it('the service’s fee-payer transaction landed: nothing more is signed, paid once', async () => {
      const before = await tokenBalance(connection, buyer.publicKey, mint)
      const { result } = await payThrough(signerOn(path), 'service', true)
      expect(result).toMatchObject({ status: 'succeeded' })
      expect(signCalls).toHaveBeenCalledTimes(1)
      expect(before - (await tokenBalance(connection, buyer.publicKey, mint))).toBe(value)
    })

    it('control: not landed and its blockhash expired (the wallet pays the fee): the rebuild is signed', async () => {
      const { result } = await payThrough(signerOn(path), 'wallet', false)
      expect(result).toMatchObject({ status: 'succeeded' })
      expect(signCalls).toHaveBeenCalledTimes(2)
    })

    it('another fee payer can sign the same message again under a new id: its absence proves nothing', async () => {
      const { error } = await payThrough(signerOn(path), 'service', false)
      expect(error).toMatchObject({ code: 'quote_expired' })
      expect(signCalls).toHaveBeenCalledTimes(1)
    })
  })

  it('a blockhash the wallet’s node does not know is not signed', async () => {
    const signer = signerOn('Keypair')
    const unknown = async () => {
      const tx = VersionedTransaction.deserialize(Buffer.from(await transfer('wallet'), 'base64'))
      tx.message.recentBlockhash = Keypair.generate().publicKey.toBase58()
      return Buffer.from(tx.serialize()).toString('base64')
    }
    const { error } = await payAgainst(
      {
        options: () => ({
          body: {
            options: [
              option('opt_sol', `${chain}:${address}`, `${chain}/token:${mint.toBase58()}`, value, [build]),
            ],
          },
        }),
        fetch: async () => ({
          body: { actions: [rpc(chain, 'solana_signTransaction', [{ transaction: await unknown() }])] },
        }),
      },
      [signer],
      'opt_sol',
    )
    expect(error).toMatchObject({
      code: 'action_rejected',
      context: expect.objectContaining({ field: 'recentBlockhash' }),
    })
    expect(signCalls).not.toHaveBeenCalled()
  })
})
