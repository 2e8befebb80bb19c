/** One line per step; a spinner while a step waits (only on a terminal, plain lines otherwise). */
const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

export async function step<T>(
  label: string,
  work: () => Promise<T>,
  detail?: (value: T) => string,
): Promise<T> {
  const started = performance.now()
  const tty = process.stdout.isTTY
  let frame = 0
  const timer = tty
    ? setInterval(() => process.stdout.write(`\r${frames[frame++ % frames.length]} ${label}`), 80)
    : undefined
  try {
    const value = await work()
    const ms = Math.round(performance.now() - started)
    const suffix = detail ? `  ${detail(value)}` : ''
    process.stdout.write(`${tty ? '\r\x1b[2K' : ''}✔ ${label} (${ms} ms)${suffix}\n`)
    return value
  } catch (error) {
    process.stdout.write(`${tty ? '\r\x1b[2K' : ''}✖ ${label}\n`)
    throw error
  } finally {
    if (timer) clearInterval(timer)
  }
}

/** A plain text table with aligned columns. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  const line = (row: readonly string[]) => row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ')
  return [line(rows[0]!), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n')
}
