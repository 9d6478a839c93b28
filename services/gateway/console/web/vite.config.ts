/// <reference types="vitest/config" />
// The console's build. File names carry no content hash and the output is one module graph
// with fixed chunk names, so two builds of the same source and lockfile give identical bytes
// (.ci/run rebuilds and compares with the committed ../dist). The gateway serves every file
// with `Cache-Control: no-cache`, so a stale cached module is never run without revalidation.
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

const gateway = process.env.AGENTIX_URL || 'http://127.0.0.1:8080';

export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: process.env.CONSOLE_OUT_DIR || '../dist',
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 4096,
    modulePreload: { polyfill: false },
    rollupOptions: {
      output: {
        entryFileNames: 'assets/[name].js',
        chunkFileNames: 'assets/[name].js',
        assetFileNames: 'assets/[name][extname]',
      },
    },
  },
  server: {
    // `npm run dev`: the console with hot reload, talking to a running gateway's API.
    proxy: { '/api': { target: gateway, changeOrigin: true } },
  },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.{ts,tsx}'],
  },
});
