/**
 * Regenerates artifact.ts (ABI and creation code of the push forwarder factory, which deploys the forwarder itself) from
 * PushForwarder.sol. Run: `npx tsx src/server/chains/evm/forwarder/compile.ts`.
 */
import { writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { abiModule, compileSolidity } from '../../../../../fixtures/solc.js'

const here = dirname(fileURLToPath(import.meta.url))
const generator = 'src/server/chains/evm/forwarder/compile.ts from PushForwarder.sol'
const factory = compileSolidity(here, 'PushForwarder.sol', 'PushForwarderFactory')
writeFileSync(
  join(here, 'artifact.ts'),
  [
    abiModule('pushForwarderFactoryAbi', factory.abi, generator).trimEnd(),
    `/** Creation code of PushForwarderFactory (${factory.compiler}); its constructor takes the owner. */`,
    `export const pushForwarderFactoryBytecode = '${factory.bytecode}' as const`,
    '',
  ].join('\n'),
)
console.log('wrote src/server/chains/evm/forwarder/artifact.ts')
