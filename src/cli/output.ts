/** Admin command output: for people by default, one JSON document with --json. */
export interface Out {
  json: boolean;
  print(human: string, data: unknown): void;
}

export function output(json: boolean): Out {
  return {
    json,
    print(human, data) {
      process.stdout.write(json ? `${JSON.stringify(data, null, 2)}\n` : `${human}\n`);
    },
  };
}
