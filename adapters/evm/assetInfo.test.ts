import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AnvilInstance, anvilPrivateKeys, deployTestToken, startAnvil } from '../../test/anvil.js'
import { evmSigner } from './index.js'

// Issue 43: the review names an asset the wallet does not list from the signer's own node.

let anvil: AnvilInstance
beforeAll(async () => {
  anvil = await startAnvil()
})
afterAll(() => anvil?.stop())

describe('evmSigner.describeAsset', () => {
  it('reads an ERC-20’s symbol and decimals from its node; native coins have 18 decimals; others are unknown', async () => {
    const token = await deployTestToken(anvil.rpcUrl)
    const signer = evmSigner({
      account: privateKeyToAccount(anvilPrivateKeys[1]),
      chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } },
    })
    expect(await signer.describeAsset!(`${anvil.caip2}/erc20:${token}`)).toEqual({
      symbol: 'USDC',
      decimals: 6,
    })
    expect(await signer.describeAsset!(`${anvil.caip2}/slip44:60`)).toEqual({ decimals: 18 })
    // Not a token (no code at the address), another chain than the signer's: nothing to say.
    const nobody = privateKeyToAccount(anvilPrivateKeys[2]).address
    expect(await signer.describeAsset!(`${anvil.caip2}/erc20:${nobody}`)).toBeUndefined()
    expect(await signer.describeAsset!(`eip155:1/erc20:${token}`)).toBeUndefined()
  })
})
