/**
 * The EVM differential generator: mutants of an honest ERC-20 `transfer` calldata, judged by the EVM
 * decoder and the core guard, and executed from the wallet's key against a real token on Anvil.
 * Property: a mutant that executes with an effect beyond the option (the wallet's tokens out over the
 * amount or over what the decoder read, an allowance granted, another account's tokens moved) was refused.
 * And the review of an accepted mutant (issue 43) shows what executing it did: the wallet's tokens out
 * and the shown recipient's in are the amount shown.
 */
import {
  type Address,
  createPublicClient,
  createWalletClient,
  erc20Abi,
  getAddress,
  type Hex,
  http,
  type PublicClient,
  type WalletClient,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { testNftAbi, testNftBytecode } from '../../fixtures/nft/index.js'
import { decodeEvmAction } from '../../protocol/evm/index.js'
import { guardActions } from '../../src/actions/guard.js'
import { createSignerRegistry } from '../../src/actions/registry.js'
import { routeActions } from '../../src/actions/route.js'
import { createReviewer, type PaymentReview } from '../../src/review/index.js'
import { anvilChain, anvilPrivateKeys, deployTestToken, mintTestToken } from '../anvil.js'
import { seededRandom } from './random.js'

const amount = 1_000_000n

export interface EvmVerdict {
  index: number
  data: Hex
  to: string
  mutations: string[]
  accepted: boolean
  harm: string[]
}

export interface EvmCampaign {
  seed: number
  verdicts: EvmVerdict[]
  violations: EvmVerdict[]
}

const [wallet, merchant, victim, attacker] = [1, 2, 4, 5].map((i) =>
  privateKeyToAccount(anvilPrivateKeys[i]!),
)

/** Selectors a hostile gateway would try on the same token, besides the honest one. */
const selectors: Hex[] = [
  '0xa9059cbb', // transfer
  '0x095ea7b3', // approve
  '0x23b872dd', // transferFrom (ERC-20; ERC-721 shares it)
  '0x42842e0e', // safeTransferFrom(address,address,uint256) (ERC-721)
  '0x9bd9bbc6', // send(address,uint256,bytes) (ERC-777)
  '0x39509351', // increaseAllowance
  '0x40c10f19', // mint
]

const word = (value: bigint) => value.toString(16).padStart(64, '0')
const addressWord = (a: Address) => word(BigInt(a))

export async function runEvmCampaign(
  rpcUrl: string,
  chainId: number,
  seed: number,
  count: number,
): Promise<EvmCampaign> {
  const chain = anvilChain(chainId, rpcUrl)
  const reader: PublicClient = createPublicClient({ chain, transport: http(rpcUrl) })
  const token = await deployTestToken(rpcUrl)
  for (const holder of [wallet, victim]) await mintTestToken(rpcUrl, token, holder!.address, 10n ** 15n)
  const client = (key: Hex): WalletClient =>
    createWalletClient({ account: privateKeyToAccount(key), chain, transport: http(rpcUrl) })
  const victimClient = client(anvilPrivateKeys[4])
  await reader.waitForTransactionReceipt({
    hash: await victimClient.writeContract({
      address: token,
      abi: erc20Abi,
      functionName: 'approve',
      args: [wallet!.address, 10n ** 14n],
      chain,
      account: victimClient.account!,
    }),
    pollingInterval: 20,
  })
  const walletClient = client(anvilPrivateKeys[1])
  // An ERC-721 the wallet owns: `transferFrom` shares ERC-20's selector, `safeTransferFrom` is its own.
  const deployed = await reader.waitForTransactionReceipt({
    hash: await victimClient.deployContract({
      abi: testNftAbi,
      bytecode: testNftBytecode,
      chain,
      account: victimClient.account!,
    }),
    pollingInterval: 20,
  })
  const nft = getAddress(deployed.contractAddress!)
  let nftId = 0n
  const mintNft = async () => {
    nftId++
    await reader.waitForTransactionReceipt({
      hash: await victimClient.writeContract({
        address: nft,
        abi: testNftAbi,
        functionName: 'mint',
        args: [wallet!.address, nftId],
        chain,
        account: victimClient.account!,
      }),
      pollingInterval: 20,
    })
  }
  await mintNft()
  const nftOwner = () =>
    reader.readContract({ address: nft, abi: testNftAbi, functionName: 'ownerOf', args: [nftId] })
  const caip2 = `eip155:${chainId}`
  const account = `${caip2}:${wallet!.address}`
  const signer = {
    namespace: 'eip155',
    accounts: () => [account],
    methods: ['eth_sendTransaction'],
    request: () => Promise.reject(new Error('the generator executes mutants itself')),
    inspect: decodeEvmAction,
  }
  const registry = createSignerRegistry([signer])
  const balance = (owner: Address) =>
    reader.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [owner] })
  const allowance = (spender: Address) =>
    reader.readContract({
      address: token,
      abi: erc20Abi,
      functionName: 'allowance',
      args: [wallet!.address, spender],
    })

  const verdicts: EvmVerdict[] = []
  for (let index = 0; index < count; index++) {
    const random = seededRandom(seed * 1_000_003 + index)
    const mutations: string[] = []
    let selector: Hex = '0xa9059cbb'
    let words = [addressWord(merchant!.address), word(amount)]
    let tail = ''
    for (let n = 1 + random.int(3); n > 0; n--) {
      // With the arguments cut away, only the selector and the tail are left to mutate.
      switch (words.length === 0 ? random.int(2) : random.int(6)) {
        case 0:
          selector = selectors[random.int(selectors.length)]!
          if (selector === '0x23b872dd' || selector === '0x42842e0e')
            words = [addressWord(victim!.address), ...words]
          mutations.push(`selector ${selector}`)
          break
        case 1: {
          const extra = 1 + random.int(40)
          tail = Array.from({ length: extra }, () => random.int(256).toString(16).padStart(2, '0')).join('')
          mutations.push(`trailing ${extra} bytes`)
          break
        }
        case 2: {
          const i = random.int(words.length)
          words[i] = `${random.int(256).toString(16).padStart(2, '0')}${words[i]!.slice(2)}`
          mutations.push(`high byte of word ${i}`)
          break
        }
        case 3: {
          const i = random.int(words.length)
          words[i] = random.int(2) ? word(amount + 1n) : word(2n ** 255n)
          mutations.push(`word ${i} value`)
          break
        }
        case 4:
          words = words.slice(0, random.int(words.length))
          mutations.push(`args cut to ${words.length}`)
          break
        default:
          words[0] = addressWord(attacker!.address)
          mutations.push('first address the attacker')
      }
    }
    // A quarter of the mutants go to the wallet's NFT instead, naming the wallet and the NFT's id.
    const target = random.int(4) === 0 ? nft : token
    if (target === nft) {
      mutations.push('sent to the ERC-721')
      if (random.int(2)) {
        selector = random.int(2) ? '0x23b872dd' : '0x42842e0e'
        words = [addressWord(wallet!.address), addressWord(attacker!.address), word(nftId)]
        mutations.push(`NFT transfer ${selector}`)
      }
      if (words.length > 0 && (selector === '0x23b872dd' || selector === '0x42842e0e'))
        words[0] = addressWord(wallet!.address)
      if (words.length > 1) words[words.length - 1] = word(nftId)
    }
    const full = `${selector}${words.join('')}${tail}`
    const data = (full.length % 2 === 0 ? full : full.slice(0, -1)) as Hex
    const verdict: EvmVerdict = { index, data, to: target, mutations, accepted: false, harm: [] }
    const action = {
      type: 'walletRpc' as const,
      walletRpc: {
        chainId: caip2,
        method: 'eth_sendTransaction',
        params: JSON.stringify([{ from: wallet!.address, to: target, data }]),
      },
    }
    let decoded = 0n
    let review: PaymentReview | undefined
    try {
      const routed = routeActions(registry, [action])
      const approved = await guardActions(routed, {
        accounts: [account],
        account,
        amount: {
          unit: `caip19/${caip2}/erc20:${token}`,
          value: amount.toString(),
          display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 },
        },
      })
      verdict.accepted = true
      decoded = decodeEvmAction(routed[0]!.request).transfers.reduce((sum, t) => sum + t.amount, 0n)
      review = await createReviewer()(approved, { optionId: `mutant ${index}` })
    } catch (error) {
      if (verdict.accepted) throw error
    }
    const [move, ...moreMoves] = review?.actions.flatMap((a) => a.moves) ?? []
    const payee = move?.to ? getAddress(move.to.split(':')[2]!) : undefined
    const payeeBefore = payee ? await balance(payee) : 0n
    const before = {
      wallet: await balance(wallet!.address),
      victim: await balance(victim!.address),
      allowances: [await allowance(attacker!.address), await allowance(merchant!.address)],
    }
    const hash = await walletClient.sendTransaction({
      to: target,
      data,
      gas: 300_000n,
      chain,
      account: walletClient.account!,
    })
    await reader.waitForTransactionReceipt({ hash, pollingInterval: 20 })
    const out = before.wallet - (await balance(wallet!.address))
    if (review) {
      const received = payee ? (await balance(payee)) - payeeBefore : 0n
      if (!move || moreMoves.length > 0 || move.spender || out !== move.amount || received !== move.amount)
        verdict.harm.push(
          `review shows ${move?.amount} to ${payee}; the chain moved ${out} out, ${received} in`,
        )
    }
    if (out > amount) verdict.harm.push(`wallet tokens out ${out}`)
    if (verdict.accepted && out > decoded) verdict.harm.push(`wallet tokens out ${out}, decoded ${decoded}`)
    if ((await balance(victim!.address)) !== before.victim)
      verdict.harm.push('another account’s tokens moved')
    const granted = [await allowance(attacker!.address), await allowance(merchant!.address)]
    if (granted.some((g, i) => g > before.allowances[i]!))
      verdict.harm.push(`allowance granted ${granted.join('/')}`)
    if ((await nftOwner()) !== wallet!.address) {
      verdict.harm.push('the wallet’s NFT moved')
      await mintNft()
    }
    verdicts.push(verdict)
  }
  return { seed, verdicts, violations: verdicts.filter((v) => v.accepted && v.harm.length > 0) }
}
