import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'

// Every example and the demo run as a user would run them, each in its own process.
function run(script: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => {
      output += chunk
    })
    child.stderr.on('data', (chunk) => {
      output += chunk
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, output }))
  })
}

describe('examples', () => {
  it.each([
    ['examples/demo.ts', /Both payments succeeded and settled\./],
    ['examples/test-mode-pay.ts', /result succeeded test:pay_/],
    ['examples/merchant.ts', /listed as refunded: true/],
    ['examples/evm-pay.ts', /after : buyer\s+75 USDC/],
    ['examples/solana-pay.ts', /settled to the merchant: txId \w+/],
    ['examples/walletconnect-pay.ts', /result succeeded test:pay_/],
    ['examples/x402-facilitator.ts', /merchant API: pay_\w+ succeeded 10000 caip19\//],
    [
      'examples/x402-pay.ts',
      /request 3 refused \(action_rejected\), nothing signed[\s\S]*merchant received 20000/,
    ],
    [
      'examples/x402-pay-solana.ts',
      /request 3 refused \(action_rejected\), nothing signed[\s\S]*merchant received 20000 minor units; the buyer holds 0 lamports/,
    ],
  ])('%s runs to success', { timeout: 120_000 }, async (script, expected) => {
    const { code, output } = await run(script)
    expect(output).toMatch(expected)
    expect(code, output).toBe(0)
  })
})
