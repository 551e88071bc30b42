Set-StrictMode -Version Latest

function Write-Step {
  param([string]$Text)
  Write-Host "##[section]$Text"
}

function Find-MSBuild {
  $vswhere = Join-Path ${env:ProgramFiles(x86)} 'Microsoft Visual Studio\Installer\vswhere.exe'
  & $vswhere -latest -requires Microsoft.Component.MSBuild -find 'MSBuild\**\Bin\MSBuild.exe' | Select-Object -First 1
}

function Invoke-Native {
  param(
    [Parameter(Mandatory)] [string]$FilePath,
    [string[]]$ArgumentList = @()
  )
  Write-Host "> $FilePath $($ArgumentList -join ' ')"
  & $FilePath @ArgumentList
  if ($LASTEXITCODE -ne 0) {
    throw "$FilePath exited with $LASTEXITCODE"
  }
}

function Get-TestCommand {
  param([string]$Configuration)
  "dotnet test App.sln -c $Configuration --no-build --logger trx"
}
