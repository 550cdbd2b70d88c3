package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResetDirOnlyEmptiesALabsOwnDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	require.NoError(t, resetDir(dir), "a new directory is made")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte("x"), 0o600))
	require.NoError(t, resetDir(dir), "the lab's own directory is emptied")
	_, err := os.Stat(filepath.Join(dir, "kubeconfig"))
	assert.True(t, os.IsNotExist(err))

	work := t.TempDir()
	precious := filepath.Join(work, "main.go")
	require.NoError(t, os.WriteFile(precious, []byte("package main"), 0o600))
	err = resetDir(work)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not made by the lab")
	_, err = os.Stat(precious)
	assert.NoError(t, err, "nothing was removed")
}
