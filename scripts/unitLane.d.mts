/** Why a test's source keeps it out of the unit lane, or undefined when nothing does. */
export function ioIn(source: string): string | undefined;
