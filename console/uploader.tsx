import { useEffect, useRef } from 'preact/hooks';
import Uppy from '@uppy/core';
import Dashboard from '@uppy/dashboard';
import Tus from '@uppy/tus';
import { Api } from './api.js';

/**
 * Upload by drag and drop (files and whole folders) with per-file progress, over tus: Uppy's
 * Dashboard with its tus plugin. Each file's key is the folder shown plus its path inside the
 * dropped folder. Uploads go in 16 MiB PATCHes and tus-js-client remembers each upload's URL in
 * localStorage (by file name, size, type, modification time and path): after a reload, adding the
 * same file again continues where the upload stopped.
 */
export function Uploader(props: { api: Api; bucket: string; prefix: string; onUploaded: () => void }) {
  const target = useRef<HTMLDivElement>(null);
  const uploaded = useRef(props.onUploaded);
  uploaded.current = props.onUploaded;

  useEffect(() => {
    const { api, bucket, prefix } = props;
    const uppy = new Uppy({ autoProceed: true, id: `files-rest-${bucket}` });
    uppy.on('file-added', (file) => {
      const data = file.data as File | Blob;
      const rel = (file.meta.relativePath as string | null | undefined) || (data as File).webkitRelativePath || file.name || 'file';
      const key = prefix + rel.replace(/^\/+/, '');
      uppy.setFileMeta(file.id, Api.tusMetadata(key, file.type));
    });
    uppy.on('upload-success', () => uploaded.current());
    uppy.use(Dashboard, {
      target: target.current!,
      inline: true,
      width: '100%',
      height: 320,
      fileManagerSelectionType: 'both',
      proudlyDisplayPoweredByUppy: false,
      note: 'Files and folders; after a reload, add the same file again to resume.',
      theme: 'light',
    });
    uppy.use(Tus, {
      endpoint: api.tusEndpoint(bucket),
      headers: api.tusHeaders(),
      chunkSize: 16 * 1024 * 1024,
      retryDelays: [0, 1000, 3000, 5000],
      limit: 4,
      allowedMetaFields: ['key', 'filename', 'filetype'],
      storeFingerprintForResuming: true,
      removeFingerprintOnSuccess: true,
    });
    return () => uppy.destroy();
  }, [props.api, props.bucket, props.prefix]);

  return <div ref={target} class="uploader" />;
}
