/**
 * The payers of the live EVM matrix on one Anvil node (--hardfork prague): a Coinbase-style account
 * factory at Coinbase Smart Wallet's factory address (so viem's toCoinbaseSmartAccount drives it), a
 * factory nobody allow-lists, Safe 1.4.1 with its CompatibilityFallbackHandler, EIP-7702 delegates
 * (permissive and strict) and EOAs upgraded to them with real type-4 transactions. Deployed once per
 * file and shared by every row.
 */
import {
  type Abi,
  type Address,
  concat,
  createPublicClient,
  createWalletClient,
  encodeAbiParameters,
  encodeFunctionData,
  getAddress,
  getContractAddress,
  type Hex,
  type hashTypedData,
  http,
  keccak256,
  type LocalAccount,
  pad,
  stringToHex,
  zeroAddress,
} from 'viem'
import { toCoinbaseSmartAccount } from 'viem/account-abstraction'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import artifacts from '../../fixtures/payers/artifacts.json' with { type: 'json' }
import { permit2Address } from '../../protocol/evm/index.js'
import { anvilChain, anvilPrivateKeys } from '../anvil.js'
import type { EvmEnv } from './support.js'

/** Where Coinbase Smart Wallet's factory (v1) lives on every chain; viem's toCoinbaseSmartAccount calls it. */
export const coinbaseFactoryAddress = getAddress('0x0ba5ed0c6aa8c49038f819e587e2633c4a9f428a')

type ArtifactName = Exclude<keyof typeof artifacts, 'compilers'>
const artifact = (name: ArtifactName) => artifacts[name] as { abi: Abi; bytecode: Hex }

/** Typed data as the service sends it over JSON (uints as strings, EIP712Domain listed). */
export interface TypedJson {
  types: Record<string, readonly { name: string; type: string }[]>
  primaryType: string
  domain: Record<string, unknown>
  message: Record<string, unknown>
}

/** The same with the uints back as bigints and without EIP712Domain, as viem signs it. */
export function forViem(typed: TypedJson) {
  const { EIP712Domain: _, ...types } = typed.types
  const uints = new Set(
    Object.values(types)
      .flat()
      .filter((f) => /^u?int\d*$/.test(f.type))
      .map((f) => f.name),
  )
  const revive = (value: unknown): unknown =>
    value && typeof value === 'object'
      ? Object.fromEntries(
          Object.entries(value).map(([k, v]) => [
            k,
            uints.has(k) && typeof v === 'string' ? BigInt(v) : revive(v),
          ]),
        )
      : value
  return {
    domain: revive(typed.domain) as Record<string, unknown>,
    types,
    primaryType: typed.primaryType,
    message: revive(typed.message) as Record<string, unknown>,
  } as Parameters<typeof hashTypedData>[0]
}

export interface Payers {
  otherFactory: Address
  permissiveDelegate: Address
  strictDelegate: Address
  safe: { singleton: Address; proxyFactory: Address; fallbackHandler: Address }
  /** A Coinbase-style account of a new owner, deployed (or not) through the canonical factory. */
  coinbase(
    deployed: boolean,
  ): Promise<{ owner: LocalAccount; account: Awaited<ReturnType<typeof toCoinbaseSmartAccount>> }>
  /** A Safe 1.4.1 (one owner, threshold 1, the compatibility fallback handler). */
  safeAccount(): Promise<{ owner: LocalAccount; address: Address }>
  /** A new EOA delegated to `delegate` by a real EIP-7702 transaction (sent and paid by a sponsor). */
  delegated(delegate: Address): Promise<LocalAccount>
  /** An undeployed account of OtherFactory: its address and the ERC-6492 deployment call. */
  otherFactoryAccount(owner: LocalAccount): { address: Address; factoryData: Hex }
}

const ownersOf = (owner: Address) => [pad(owner)] as const

export async function deployPayers(env: Pick<EvmEnv, 'anvil' | 'publicClient'>): Promise<Payers> {
  const chain = anvilChain(env.anvil.chainId, env.anvil.rpcUrl)
  const client = createPublicClient({ chain, transport: http(env.anvil.rpcUrl) })
  const deployer = createWalletClient({
    chain,
    transport: http(env.anvil.rpcUrl),
    account: privateKeyToAccount(anvilPrivateKeys[9]),
  })
  const mined = async (hash: Hex) => {
    const receipt = await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 })
    if (receipt.status !== 'success') throw new Error(`Fixture transaction ${hash} reverted`)
    return receipt
  }
  const deploy = async (name: ArtifactName, args: readonly unknown[] = []) => {
    const { abi, bytecode } = artifact(name)
    const receipt = await mined(await deployer.deployContract({ abi, bytecode, args }))
    return getAddress(receipt.contractAddress!)
  }
  const rpc = (method: string, params: unknown[]) => anvilRpc(env.anvil.rpcUrl, method, params)

  // The factory keeps no storage and no immutables: its code alone, copied to the canonical address, works.
  const built = await deploy('CoinbaseStyleFactory')
  await rpc('anvil_setCode', [coinbaseFactoryAddress, await env.publicClient.getCode({ address: built })])
  const [otherFactory, permissiveDelegate, strictDelegate, singleton, proxyFactory, fallbackHandler] = [
    await deploy('OtherFactory'),
    await deploy('PermissiveDelegate'),
    await deploy('StrictDelegate'),
    await deploy('Safe'),
    await deploy('SafeProxyFactory'),
    await deploy('CompatibilityFallbackHandler'),
  ]
  let safeNonce = 0n

  return {
    otherFactory,
    permissiveDelegate,
    strictDelegate,
    safe: { singleton, proxyFactory, fallbackHandler },
    async coinbase(deployed) {
      const owner = privateKeyToAccount(generatePrivateKey())
      const account = await toCoinbaseSmartAccount({
        client,
        owners: [owner],
        version: '1',
      })
      if (deployed) {
        const { factory, factoryData } = await account.getFactoryArgs()
        await mined(await deployer.sendTransaction({ to: factory!, data: factoryData! }))
      }
      return { owner, account }
    },
    async safeAccount() {
      const owner = privateKeyToAccount(generatePrivateKey())
      const safe = artifact('Safe')
      const factory = artifact('SafeProxyFactory')
      const initializer = encodeFunctionData({
        abi: safe.abi,
        functionName: 'setup',
        args: [[owner.address], 1n, zeroAddress, '0x', fallbackHandler, zeroAddress, 0n, zeroAddress],
      })
      safeNonce += 1n
      const receipt = await mined(
        await deployer.writeContract({
          address: proxyFactory,
          abi: factory.abi,
          functionName: 'createProxyWithNonce',
          args: [singleton, initializer, safeNonce],
        }),
      )
      // ProxyCreation(address indexed proxy, address singleton): the proxy is the first topic.
      const created = receipt.logs.find((log) => getAddress(log.address) === proxyFactory)
      return { owner, address: getAddress(`0x${created!.topics[1]!.slice(26)}`) }
    },
    async delegated(delegate) {
      const eoa = privateKeyToAccount(generatePrivateKey())
      const authorization = await eoa.signAuthorization({
        chainId: env.anvil.chainId,
        contractAddress: delegate,
        nonce: 0,
      })
      // Sent elsewhere: a call into the account would run the delegate, which has no receive function.
      await mined(await deployer.sendTransaction({ to: zeroAddress, authorizationList: [authorization] }))
      return eoa
    },
    otherFactoryAccount(owner) {
      const owners = ownersOf(owner.address)
      const initCode = concat([
        artifact('CoinbaseStyleAccount').bytecode,
        encodeAbiParameters([{ type: 'bytes[]' }], [owners]),
      ])
      const salt = keccak256(encodeAbiParameters([{ type: 'bytes[]' }, { type: 'uint256' }], [owners, 0n]))
      return {
        address: getContractAddress({ opcode: 'CREATE2', from: otherFactory, salt, bytecode: initCode }),
        factoryData: encodeFunctionData({
          abi: artifact('OtherFactory').abi,
          functionName: 'createAccount',
          args: [owners, 0n],
        }),
      }
    },
  }
}

/** A Safe owner's signature for the Safe's ERC-1271: the owner signs SafeMessage(bytes message) of the hash. */
export function signAsSafeOwner(
  owner: LocalAccount,
  safe: Address,
  chainId: number,
  hash: Hex,
): Promise<Hex> {
  return owner.signTypedData({
    domain: { chainId, verifyingContract: safe },
    types: { SafeMessage: [{ name: 'message', type: 'bytes' }] },
    primaryType: 'SafeMessage',
    message: { message: hash },
  })
}

/** Raw JSON-RPC to the node (Anvil's own methods). */
export async function anvilRpc<T = unknown>(rpcUrl: string, method: string, params: unknown[]): Promise<T> {
  const response = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  })
  const body = (await response.json()) as { result?: T; error?: { message: string } }
  if (body.error) throw new Error(`${method}: ${body.error.message}`)
  return body.result as T
}

const permit2DomainTypeHash = keccak256(
  stringToHex('EIP712Domain(string name,uint256 chainId,address verifyingContract)'),
)

function permit2DomainSeparator(chainId: number, at: Address): Hex {
  return keccak256(
    encodeAbiParameters(
      [{ type: 'bytes32' }, { type: 'bytes32' }, { type: 'uint256' }, { type: 'address' }],
      [permit2DomainTypeHash, keccak256(stringToHex('Permit2')), BigInt(chainId), at],
    ),
  )
}

/**
 * A USDT-style token (no EIP-3009, the approve-reset rule) and Permit2 at its canonical address. Permit2
 * keeps its domain separator in an immutable computed for the address it was deployed at: the runtime
 * code copied to the canonical address has that value replaced by the canonical address's separator,
 * and the result is checked against what Permit2 then reports.
 */
export async function deployTetherAndPermit2(rpcUrl: string): Promise<{ tether: Address }> {
  const transport = http(rpcUrl)
  const client = createPublicClient({ transport })
  const chainId = await client.getChainId()
  const chain = anvilChain(chainId, rpcUrl)
  const deployer = createWalletClient({ chain, transport, account: privateKeyToAccount(anvilPrivateKeys[8]) })
  const deploy = async (name: ArtifactName) => {
    const { abi, bytecode } = artifact(name)
    const hash = await deployer.deployContract({ abi, bytecode })
    const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
    return getAddress(receipt.contractAddress!)
  }
  const tether = await deploy('TetherLike')
  const built = await deploy('Permit2')
  const runtime = (await client.getCode({ address: built }))!
  const here = permit2DomainSeparator(chainId, built).slice(2)
  const canonical = permit2DomainSeparator(chainId, permit2Address).slice(2)
  if (!runtime.includes(here)) throw new Error('Permit2 runtime code does not hold its domain separator')
  await anvilRpc(rpcUrl, 'anvil_setCode', [permit2Address, runtime.replaceAll(here, canonical)])
  const reported = await client.readContract({
    address: permit2Address,
    abi: [
      {
        type: 'function',
        name: 'DOMAIN_SEPARATOR',
        stateMutability: 'view',
        inputs: [],
        outputs: [{ type: 'bytes32' }],
      },
    ],
    functionName: 'DOMAIN_SEPARATOR',
  })
  if (reported !== `0x${canonical}`) throw new Error(`Permit2 at its canonical address reports ${reported}`)
  return { tether }
}

export const tetherAbi = artifacts.TetherLike.abi as Abi
