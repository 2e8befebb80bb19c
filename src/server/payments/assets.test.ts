import { describe, expect, it } from 'vitest'
import { resolveConfig } from '../config.js'
import { toAmount, unitDisplay } from './assets.js'

describe('amount display', () => {
  const config = resolveConfig(
    {
      chains: {
        'eip155:31337': {
          rpcUrl: 'http://127.0.0.1:8545',
          signerKey: '0x1',
          assets: {
            'eip155:31337/erc20:0x5FbDB2315678afecb367f032d93F642f64180aa3': {
              symbol: 'tUSD',
              name: 'Test USD',
              decimals: 6,
            },
          },
        },
      },
    },
    {},
  )
  it('knows fiat decimals', () => {
    expect(unitDisplay('iso4217/USD', config)).toEqual({
      assetName: 'US Dollar',
      assetSymbol: 'USD',
      decimals: 2,
    })
    expect(unitDisplay('iso4217/JPY', config)?.decimals).toBe(0)
    expect(unitDisplay('iso4217/KWD', config)?.decimals).toBe(3)
    expect(unitDisplay('iso4217/ZZZ', config)).toBeUndefined()
  })
  it('knows the default test tokens and configured ones, EVM case-insensitively', () => {
    expect(
      unitDisplay('caip19/eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', config),
    ).toMatchObject({ assetSymbol: 'USDC', networkName: 'Ethereum', decimals: 6 })
    expect(
      unitDisplay(
        'caip19/solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v',
        config,
      )?.networkName,
    ).toBe('Solana')
    expect(
      unitDisplay('caip19/eip155:31337/erc20:0x5fbdb2315678afecb367f032d93f642f64180aa3', config),
    ).toMatchObject({ assetSymbol: 'tUSD', networkName: 'Anvil' })
    expect(
      unitDisplay('caip19/eip155:1/erc20:0x0000000000000000000000000000000000000001', config),
    ).toBeUndefined()
  })
  it('builds an Amount', () => {
    expect(toAmount('iso4217/EUR', '995', config)).toEqual({
      unit: 'iso4217/EUR',
      value: '995',
      display: { assetName: 'Euro', assetSymbol: 'EUR', decimals: 2 },
    })
  })
})
