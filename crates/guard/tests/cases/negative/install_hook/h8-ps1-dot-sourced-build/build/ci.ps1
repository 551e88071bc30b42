param([ValidateSet('Debug', 'Release')] [string]$Configuration = 'Release')
$ErrorActionPreference = 'Stop'
. $PSScriptRoot\common.ps1

Write-Step 'restore'
Invoke-Native -FilePath 'dotnet' -ArgumentList @('restore', 'App.sln')

Write-Step 'build'
$msbuild = Find-MSBuild
Invoke-Native -FilePath $msbuild -ArgumentList @('App.sln', "/p:Configuration=$Configuration", '/m', '/nologo')

Write-Step 'test'
Invoke-Expression (Get-TestCommand -Configuration $Configuration)

Write-Step 'package'
Start-Process -FilePath 'dotnet' -ArgumentList @('pack', 'src/App/App.csproj', '-c', $Configuration) -Wait -NoNewWindow
