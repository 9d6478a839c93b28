from services.tools_go_equiv.main import main

main()
