import path from 'node:path'
import { measureBundle } from '../bundle.js'
import { type BenchCase, coreBudgetBytes, log, record, root, targets } from '../harness.js'

async function bundlePhase(): Promise<void> {
  const entries: [string, string, string][] = [
    ['caipay', 'caipay', 'src/index.ts'],
    ['adapter_evm', 'caipay/adapters/evm', 'adapters/evm/index.ts'],
    ['adapter_solana', 'caipay/adapters/solana', 'adapters/solana/index.ts'],
    ['adapter_walletconnect', 'caipay/adapters/walletconnect', 'adapters/walletconnect/index.ts'],
  ]
  for (const [key, name, entry] of entries) {
    const b = await measureBundle(path.join(root, entry))
    const core = key === 'caipay'
    const peers = [...new Set(b.externals)]
    log(
      `bundle   ${name.padEnd(38)} ${(b.minBytes / 1000).toFixed(1)} kB min, ${(b.gzipBytes / 1000).toFixed(1)} kB min+gzip` +
        (peers.length ? ` (left out: ${peers.join(', ')})` : ''),
    )
    record(`bundle.${key}.min`, b.minBytes, 'bytes')
    record(`bundle.${key}.gzip`, b.gzipBytes, 'bytes', core ? coreBudgetBytes : null)
    if (core) {
      targets.push({
        what: 'caipay core: < 15 kB min+gzip',
        met: b.gzipBytes < coreBudgetBytes,
        detail: `${b.gzipBytes} bytes`,
      })
    }
  }
}

export default { name: 'bundle', order: 70, run: () => bundlePhase() } satisfies BenchCase
