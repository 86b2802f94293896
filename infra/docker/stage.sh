#!/bin/sh
# Stages what the image runs into $1: the root manifest and lockfile, each workspace's
# package.json and built dist/, and the model repository (models, not their build scripts).
# Run after `npm run build`; then `npm ci --omit=dev --omit=optional --ignore-scripts` in $1 gives the runtime.
# The Dockerfile and test/build.test.ts both use it, so the test proves the image's recipe.
set -eu
out=$1
mkdir -p "$out"
cp package.json package-lock.json .npmrc "$out/"
for dir in packages/* apps/*; do
  [ -f "$dir/package.json" ] || continue
  mkdir -p "$out/$dir"
  cp "$dir/package.json" "$out/$dir/"
  cp -r "$dir/dist" "$out/$dir/"
done
mkdir -p "$out/models"
for model in models/*/; do
  [ -f "$model/model.json" ] && cp -r "$model" "$out/models/"
done
rm -rf "$out/models/build"
